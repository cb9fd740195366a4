"""The flight recorder: forward hooks on the two models that log what each forward was fed and
what it scored, without the user's decoder knowing: the Recorder keeps each forward's inputs,
cache and time, the observers in OBSERVERS the rest (observe/__init__.py; docs/recorder.md,
"How it records" and "Where the time goes"; schema in the same file)."""
from __future__ import annotations

import time
import weakref
from functools import partial
from types import SimpleNamespace as Call

import torch

from specdec_core.compat import forward_cache, output_cache, preallocated
from specdec_core.recorder.observe import Observer, fed_next, ints, mrope, processing
from specdec_core.recorder.observe.batch_hooks import Batches
from specdec_core.recorder.observe.depth import Depth
from specdec_core.recorder.observe.edge_vocab import EdgeVocab
from specdec_core.recorder.observe.head_hooks import HeadWatch
from specdec_core.recorder.observe.parts import Parts
from specdec_core.recorder.observe.tree_hooks import Trees, fingerprint

SCHEMA = "specscope.recording/1"
TOP = 5


def _cache_len(cache) -> int | None:
    if cache is None:
        return None
    try:
        return int(cache.get_seq_length())
    except Exception:   # legacy tuple caches
        try:
            return int(cache[0][0].shape[-2])
        except Exception:
            return None


class _Keys:
    """Stable small ids for caches, so the tape can follow each cache (docs/recorder.md, "How it
    records": cache identity): each cache's fingerprint after its last write is kept (one tensor
    per id; Trees reads it too) and a NEW object holding what a recorded cache held gets its id."""

    def __init__(self):
        self.refs: list = []            # (weak ref to a cache object, key)
        self.n = 0
        self.held: dict = {}            # key -> fingerprint after its latest write

    def key(self, cache) -> int | None:
        if cache is None:
            return None
        for r, k in self.refs:
            if r() is cache:
                return k
        k = self._same_content(fingerprint(cache))
        if k is None:
            k, self.n = self.n, self.n + 1
        try:
            ref = weakref.ref(cache)
        except TypeError:
            ref = (lambda c=cache: c)
        self.refs.append((ref, k))
        return k

    def _same_content(self, t) -> int | None:
        if t is None:
            return None
        n = t.shape[-2]
        for k in reversed(list(self.held)):           # most recently written first
            old = self.held[k]
            if (old.shape[:-2] == t.shape[:-2] and old.shape[-1] == t.shape[-1]
                    and old.shape[-2] >= n and old.dtype == t.dtype
                    and torch.equal(old[..., :n, :], t)):
                return k
        return None

    def written(self, cache, k) -> None:
        t = fingerprint(cache)
        if t is not None and k is not None:
            self.held.pop(k, None)
            self.held[k] = t


class Rows(Observer):
    """Each forward's scored rows (`rows`, from the logits of the declared processing,
    processing.py) and, in the previous forward of the same role, the rank of the token this
    forward was fed first (`fed_next`: what a drafter needs)."""

    def __init__(self, recorder):
        super().__init__(recorder)
        self.held: dict[str, tuple] = {}     # role -> (its last forward, last row log-probs)
        self.proc = processing.Watch(recorder.declared)   # declared top-k/top-p/penalty (issue 42)

    def post(self, f, call):
        # the last forward of the role this one played (a partial-depth cloud forward drafts)
        fed_next(self.held.pop(call.who, None), f["ids"], f["i"])
        logits = call.logits
        if isinstance(logits, torch.Tensor) and logits.dim() == 3:
            scored, extra = self.proc.logits(call.who, f, logits[0])
            f["rows"], last = self.r.score(scored, f["ids"] or [], extra)
            self.held[call.who] = (f, last)
        else:
            f["rows"] = None


# The observers, in the order the Recorder calls them (the protocol: observe/__init__.py): Depth
# decides who played a forward before Rows scores it, Trees and Batches complete the rows.
OBSERVERS = (Depth, Rows, Trees, Batches, HeadWatch, Parts, EdgeVocab, mrope.Multimodal)


class Recorder:
    """Context manager: `with Recorder(edge, cloud, tok, prompt_ids, stop_ids, k=4) as rec:`.

    declared: the user's declared knobs (k, temperature, verify, max_new_tokens, min_new_tokens,
    sentence_ids; the declared processing draft_top_k/top_p, target_top_k/top_p/
    repetition_penalty: recorder/observe/processing.py); the checks compare what was observed with them.
    drafter: a head module (head_hooks.py). The observers: OBSERVERS."""

    def __init__(self, edge, cloud, tokenizer, prompt_ids, stop_ids=(), drafter=None, **declared):
        self.models = {"edge": edge, "cloud": cloud}
        self.distinct = [(r, m) for r, m in self.models.items() if r == "edge" or m is not edge]
        self.tokenizer, self.drafter = tokenizer, drafter
        self.prompt_ids = ints(prompt_ids)
        self.stop_ids = sorted({int(s) for s in (stop_ids or ())})
        self.declared = {k: v for k, v in declared.items() if v is not None}
        self.forwards: list[dict] = []
        self._handles: list = []
        self._pending: dict[str, list] = {"edge": [], "cloud": [], "head": []}
        self._keys = _Keys()
        self._t0 = self.wall_s = 0.0
        self.observers = [cls(self) for cls in OBSERVERS]

    # -- context manager ------------------------------------------------------------------------
    def __enter__(self):
        for role, m in self.distinct:
            self._handles.append(m.register_forward_pre_hook(partial(self._pre, role), with_kwargs=True))
            self._handles.append(m.register_forward_hook(partial(self._post, role), with_kwargs=True))
        for o in self.observers:
            self._handles += o.attach()
        self._t0 = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.wall_s = time.perf_counter() - self._t0
        self.close()
        return False

    def close(self) -> None:
        for o in self.observers:
            o.close()
        for h in self._handles:
            h.remove()
        self._handles = []

    @torch.no_grad()
    def score(self, logits: torch.Tensor, ids: list[int], extra: dict | None = None):
        """(rows, the last row's log-probs) of a forward's logits [t, V] fed `ids`: per scored row
        (the last t input positions) argmax, top-5, entropy, and the rank / log-prob of the input
        token that follows the row. One batched op per forward. With a declared temperature T > 0
        also `lse_t` = logsumexp(logp / T) per row, so that any stored log-prob l converts to the
        log-prob at T: l / T - lse_t (recorder/checks/sampling/rule.py)."""
        t, temperature = logits.shape[0], self.declared.get("temperature")
        logp = torch.log_softmax(logits.float(), -1)
        top = _top(logp, min(TOP, logp.shape[-1]))
        ent = -(logp.exp() * logp).sum(-1)
        off = len(ids) - t                         # input index of the first scored row
        nxt = ids[off + 1:] if off >= -1 else []   # tokens following rows 0..t-2
        ranks, lps = [], []
        if nxt:
            n = len(nxt)
            idx = torch.tensor(nxt, dtype=torch.long, device=logp.device).clamp(0, logp.shape[-1] - 1)
            sub = logp[:n]
            v = sub.gather(1, idx[:, None])
            ranks = ((sub > v).sum(-1) + 1).tolist()
            lps = [round(x, 5) for x in v[:, 0].tolist()]
        rows = {"offset": off, "vocab": int(logits.shape[-1]),
                "argmax": top.indices[:, 0].tolist(),
                "top_ids": top.indices.tolist(),
                "top_logp": [[round(x, 5) for x in r] for r in top.values.tolist()],
                "entropy": [round(x, 5) for x in ent.tolist()],
                "next_rank": ranks, "next_logp": lps, "fed_next": None,
                **(extra or {})}    # declared processing's raw / penalised argmax (processing.py)
        if temperature and float(temperature) > 0:
            rows["lse_t"] = [round(x, 6) for x in
                             torch.logsumexp(logp / float(temperature), -1).tolist()]
        return rows, logp[-1].clone()

    # -- hooks -----------------------------------------------------------------------------------
    @torch.compiler.disable
    def _pre(self, role, module, args, kwargs):
        h0 = time.perf_counter()
        ids = kwargs.get("input_ids", args[0] if args else None)
        cache = forward_cache(module, args, kwargs)
        mask = kwargs.get("attention_mask")
        embeds = kwargs.get("inputs_embeds") if ids is None else None
        text_pos, rows3 = mrope.split_positions(kwargs.get("position_ids"))
        rec = {"i": len(self.forwards), "model": role,
               "ids": ints(ids),
               "batch": int(ids.shape[0]) if isinstance(ids, torch.Tensor) and ids.dim() == 2 else None,
               "position_ids": text_pos,
               "cache_position": ints(kwargs.get("cache_position")),
               "mask_shape": list(mask.shape) if isinstance(mask, torch.Tensor) else None,
               "cache_len": _cache_len(cache), "cache": self._keys.key(cache),
               "use_cache": kwargs.get("use_cache"),
               "inputs_embeds": embeds is not None}
        if rows3 is not None:
            rec["mrope"] = rows3
        if preallocated(cache):
            rec["cache_static"] = True         # rolled back by its write position
        if kwargs.get("input_features") is not None or kwargs.get("mm_encoder_outputs") is not None:
            rec["input_features"] = True
        if isinstance(embeds, torch.Tensor) and embeds.dim() == 3:
            # an inputs_embeds forward (e.g. an audio prefill built by hand) fed these ids
            # if its text rows are the model's own embeddings of the prompt at this offset
            rec["ids"] = mrope.ids_of_embeds(module, embeds, self.prompt_ids,
                                             rec["cache_len"] or 0)
            rec["batch"] = int(embeds.shape[0])
        call = Call(role=role, module=module, args=args, kwargs=kwargs, ids=ids, mask=mask, cache=cache)
        for o in self.observers:
            o.pre(rec, call)
        self.forwards.append(rec)
        self._pending[role].append(rec)
        t = time.perf_counter()     # the forward starts now: the hook's own cost is "pre"
        rec["time"] = {"t": t - self._t0, "dur": None, "pre": t - h0, "post": None}

    @torch.compiler.disable
    def _post(self, role, module, args, kwargs, output):
        rec = self._pending[role].pop() if self._pending[role] else None
        if rec is None:
            return
        logits = getattr(output, "logits", None)
        if logits is None and isinstance(output, tuple) and output:
            logits = output[0]
        if isinstance(logits, torch.Tensor) and logits.is_cuda:
            torch.cuda.synchronize(logits.device)   # the GPU's time is the forward's
        t_end = time.perf_counter()
        cache = output_cache(output)
        if rec["cache"] is None and cache is not None:
            rec["cache"] = self._keys.key(cache)
            rec["cache_len"] = 0
        if cache is not None and rec.get("use_cache") is not False:
            self._keys.written(cache, rec["cache"])
        delta = kwargs.get("rope_deltas", getattr(getattr(module, "model", None), "rope_deltas", None))
        if isinstance(delta, torch.Tensor) and delta.numel():
            rec["rope_deltas"] = int(delta.reshape(-1)[0])   # what the model itself holds
        call = Call(role=role, who=role, module=module, args=args, kwargs=kwargs, output=output,
                    logits=logits, cache=cache)
        for o in self.observers:
            o.post(rec, call)
        tm = rec["time"]                            # set by _pre, as the forward started
        tm["dur"] = round(t_end - self._t0 - tm["t"], 6)
        tm["t"], tm["pre"] = round(tm["t"], 6), round(tm["pre"], 6)
        tm["post"] = round(time.perf_counter() - t_end, 6)

    # -- result ----------------------------------------------------------------------------------
    def finish(self, out_ids) -> dict:
        """The recording: JSON-serialisable, schema specscope.recording/1 (docs/recorder.md)."""
        self.close()
        out = ints(out_ids) or []
        vocab = {}
        if self.tokenizer is not None:
            vocab["tokenizer"] = len(self.tokenizer)
        for role, m in self.models.items():
            cfg = getattr(m, "config", None)
            text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg   # thinkers
            vocab[role] = getattr(text, "vocab_size", None)
        rec = {"schema": SCHEMA, "prompt_ids": self.prompt_ids, "stop_ids": self.stop_ids,
               "declared": dict(self.declared), "out_ids": out, "vocab": vocab,
               "same_model": self.models["edge"] is self.models["cloud"],
               "wall_s": round(self.wall_s, 4), "error": None, "forwards": self.forwards}
        for o in self.observers:
            o.finish(rec)
        return rec


def _top(logp: torch.Tensor, k: int):
    """topk with exact ties in torch.argmax's order (lowest id first): bf16/fp16 logits tie
    often, and a loop's argmax picks the first maximum, so row 0 must be that one."""
    top = torch.topk(logp, k, -1)
    order = top.indices.sort(dim=-1).indices                   # ascending id...
    vals, ids = top.values.gather(-1, order), top.indices.gather(-1, order)
    order = vals.sort(dim=-1, descending=True, stable=True).indices    # ...then by value, stable
    return torch.return_types.topk((vals.gather(-1, order), ids.gather(-1, order)))
