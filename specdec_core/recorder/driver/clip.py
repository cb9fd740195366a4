"""Record one clip: a user's own decoder (FILE.py[:FUNCTION]) run under the Recorder and diagnosed
blind (`record_clip`); `recorded`, the steps it shares with the built-in decoder; the declared
knobs (`parse_sets`)."""
from __future__ import annotations

import contextlib
import copy
import importlib.util
import inspect
import sys
import threading
from pathlib import Path

from specdec_core.decoding.config import KNOBS as ENGINE
from specdec_core.errors import UserError
from specdec_core.recorder import report
from specdec_core.recorder.observe.processing import KNOBS as PROCESSING
from specdec_core.recorder.driver.user_code import check_call, failed, where as _where
from specdec_core.result import ClipResult

# The knobs a loop declares (`--set`): the engine's own where they mean the same (its names,
# types, ranges and defaults: decoding/config.py, decoding/knobs.py; the built-in decoder
# declares these from its config, builtin.declared_knobs) and the declared processing (issue 42).
ENGINE_KNOBS = ("k", "max_new_tokens", "min_new_tokens", "temperature", "verify", "rank_threshold",
                "prompt_type", "stop_at_first_sentence")
# and `seed`, the engine's name of `record --seed` (clip i: SEED+i, as `run --set seed=`)
KNOBS = {**{n: ENGINE[n] for n in ENGINE_KNOBS + ("seed",)}, **PROCESSING}
# declared unless set otherwise (min_new_tokens, rank_threshold: only when set, a loop need not have them)
DEFAULTS = {n: ENGINE[n].default for n in ("k", "max_new_tokens", "temperature", "verify", "prompt_type")}


COPY_LIMIT = 200_000_000      # parameters of a pair still copied per recording (demo: ~2M)
_SHARED = threading.Lock()


def load_function(target: str):
    file, sep, name = target.rpartition(":")
    if not sep and target.endswith(".py"):
        file, name = target, "decode"
    if not file.endswith(".py") or not name.isidentifier():
        raise UserError(f"expected FILE.py or FILE.py:FUNCTION, got {target!r}")
    path = Path(file).resolve()
    if not path.is_file():
        raise UserError(f"no such file: {file}")
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(f"_specscope_user_{path.stem}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except Exception as e:
        raise UserError(f"cannot import {file}: {_where(e)}") from None
    finally:
        sys.path.remove(str(path.parent))
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise UserError(f"{file} has no function {name!r}")
    return fn, path


def parse_sets(sets) -> dict:
    """`--set KEY=VALUE ...` -> the declared knobs (DEFAULTS, then each set one, read and checked
    by its Knob); a bad key or value is one line (UserError)."""
    d = dict(DEFAULTS)
    for kv in sets:
        key, sep, val = kv.partition("=")
        key = key.strip()
        if not sep or key not in KNOBS:
            raise UserError(f"--set expects KEY=VALUE with KEY one of {', '.join(KNOBS)}, got {kv!r}")
        d[key] = KNOBS[key].check(KNOBS[key].parse(val))
    return d


def _extra_knobs(fn, knobs: dict, model_inputs: dict | None = None, seed: int | None = None) -> dict:
    """What a decoder's signature asks for beyond the contract, each only where it names it: the
    declared temperature, `model_inputs` (Omni: input_features, ...) when there are any, `seed` (each
    clip its own: pooled runs must be independent, issue 36), each declared processing knob."""
    ps = _params(fn)
    anything = any(p.kind is p.VAR_KEYWORD for p in ps.values())
    extra = {}
    if ("temperature" in ps or anything) and knobs.get("temperature"):
        extra["temperature"] = knobs["temperature"]
    if ("model_inputs" in ps or anything) and model_inputs:
        extra["model_inputs"] = dict(model_inputs)
    if "seed" in ps and seed is not None:
        extra["seed"] = seed
    extra.update({k: knobs[k] for k in PROCESSING if k in ps and knobs.get(k) is not None})
    return extra


def _params(fn) -> dict:
    """fn's parameters by name ({} where there is no signature to read: a builtin)."""
    try:
        return dict(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return {}


def call_kwargs(fn, knobs: dict, stops: tuple, extra: dict, head=None) -> dict:
    """The keyword arguments of the call, checked against fn's signature (UserError, one line,
    naming the file:line of the def and the expected signature)."""
    kwargs = {"k": knobs["k"], "max_new_tokens": knobs["max_new_tokens"], "stop_ids": stops,
              **extra, **({"drafter": head} if head is not None else {})}
    check_call(fn, 4, kwargs)
    return kwargs


def head_drafter(fn, backend):
    """A decoder whose signature names `drafter` drafts with the backend's head (a module fed
    the cloud's hidden states, issue 35): it is handed the head, and the Recorder hooks it."""
    wants = "drafter" in _params(fn)
    head = getattr(backend, "head", None) if wants else None
    if wants and head is None:
        raise UserError(f"the decoder takes a head drafter; the {backend.name} backend has none")
    return head


@contextlib.contextmanager
def kept_configs(*models):
    """The models' configs as they were before the user's decoder, whatever it did or raised:
    the backend is shared (tests, the app's visitors). transformers 5.0.0's early-exit generator
    sets `num_hidden_layers` to the exit layer and raised before restoring it, so every later
    decode on the same cloud ran 4 layers (issue 36)."""
    configs = [m.config for m in models if getattr(m, "config", None) is not None]
    saved = [dict(vars(c)) for c in configs]
    try:
        yield
    finally:
        for c, before in zip(configs, saved):
            for name in set(vars(c)) - set(before):
                delattr(c, name)
            vars(c).update(before)


@contextlib.contextmanager
def recorded(backend, prompt, declared: dict, seed: int | None = None, drafter=None, cloud=None,
             dependence: bool = True, **fields):
    """The steps every recording of one clip shares, whoever decodes (record_clip, builtin.judged_stream),
    so the two cannot drift. Yields a dict: the decode runs inside (the Recorder `got["rec"]`
    observing, configs kept, torch's global generator seeded so loops that sample with torch.rand
    and no generator of their own draw the same on the same seed) and puts the output ids in
    `got["out"]` (or `got["error"]`); after it, with the hooks off, `got` holds the recording, the
    audio dependence (its forward inside the hooks would read as a cloud forward verifying the whole
    output) and `got["result"]`, the judged result the caller completes and `report.finish`es."""
    import torch

    from specdec_core.decoding.decoder import model_dtype
    from specdec_core.decoding.dependence import audio_dependence
    from specdec_core.decoding.vocab import TokenClasses
    from specdec_core.recorder.analyze import checked
    from specdec_core.recorder.observe.hooks import Recorder

    if seed is not None:
        torch.manual_seed(seed)
    declared = dict(declared)
    if declared.pop("stop_at_first_sentence", False):    # declared as the ids it stops on
        declared["sentence_ids"] = sorted(TokenClasses.for_tokenizer(backend.tokenizer).ids("sentence_end"))
    got = {"rec": Recorder(backend.edge, backend.cloud if cloud is None else cloud, backend.tokenizer,
                           prompt.input_ids, backend.stop_ids, drafter=drafter, **declared)}
    with got["rec"], kept_configs(backend.edge, backend.cloud):
        yield got
    if "out" not in got:                   # the decode failed (got["error"]): nothing to judge
        return
    out = got["out"]
    got["recording"] = recording = dict(got["rec"].finish(out), backend=backend.name,
                                        dtype=model_dtype(backend), seed=seed, **fields)
    got["dependence"] = dep = audio_dependence(backend, prompt, out) if dependence else None
    got["result"] = checked(recording, backend.tokenizer, prompt.info, dep)


def record_clip(fn, path: Path, backend, src, knobs: dict, reference: bool = False,
                seed: int | None = None, isolated: bool = False) -> ClipResult:
    """Record and judge one clip (`record`, the Inspect tab, scripts); `isolated`: on private
    copies of the models as the built-in's judged runs (the page: other sessions decode on them)."""
    import torch

    from specdec_core.backends import prepare
    from specdec_core.decoding.config import DecodeConfig
    from specdec_core.decoding.numerics import probe

    label = None if src is None else str(src)     # a text-only pair (hf): no audio
    declared = {k: v for k, v in knobs.items() if k != "prompt_type"}
    stops, (backend, lock) = tuple(backend.stop_ids), isolate(backend, isolated)
    head = head_drafter(fn, backend)
    try:              # a clip that cannot be read, a signature that cannot take the call
        prompt = prepare(backend, src, DecodeConfig(prompt_type=knobs["prompt_type"]))
        kwargs = call_kwargs(fn, knobs, stops, _extra_knobs(fn, knobs, prompt.prefill_kwargs, seed), head)
    except UserError as e:
        return ClipResult(audio=label, ok=False, error=str(e))
    sys.path.insert(0, str(path.parent))
    with lock, recorded(backend, prompt, declared, seed, drafter=head) as got, torch.no_grad():
        try:
            # on the cloud's device, as HF code moves a processor's output (`.to(model.device)`)
            ids = prompt.input_ids.to(next(backend.cloud.parameters()).device, copy=True)
            out = fn(backend.edge, backend.cloud, backend.tokenizer, ids, **kwargs)
            got["out"] = [int(x) for x in (out.reshape(-1).tolist() if isinstance(out, torch.Tensor) else out)]
        except Exception as e:                    # the user's code failed: nothing to analyse
            got["error"] = failed(fn, e)
        finally:
            sys.path.remove(str(path.parent))
    if "error" in got:
        return ClipResult(audio=label, ok=False, error=got["error"], recording=got["rec"].finish([]))
    res = got["result"]
    res.audio, res.ids, recording = label, got["out"], res.recording
    try:        # width-1 vs width-(k+1) logits of the cloud on this clip
        recording["numerics"] = probe(backend, prompt, res.ids, k=knobs["k"])
    except Exception:   # noqa: BLE001 - a probe that cannot run is no finding
        recording["numerics"] = None
    if reference:
        from specdec_core.recorder.driver.reference import reference_diff

        res.extra["reference"] = reference_diff(backend, prompt, res, knobs)
    return report.finish(res)


def pooled_findings(results: list) -> list[dict]:
    """Checks that need more evidence than one clip gives, over every recorded clip together (one
    Evidence per distinct run): a peaked edge drafts few informative tokens per clip, so a second
    temperature is often invisible on one clip and plain over six."""
    from specdec_core.recorder import evidence
    from specdec_core.recorder.analyze import evidence_of
    from specdec_core.recorder.checks import registry

    def clip(r):
        rec = getattr(r, "recording", None) or r.get("recording")
        return getattr(r, "evidence", None) or (evidence_of(rec) if rec else None)

    runs = evidence.distinct([e for r in results if r.get("ok") and (e := clip(r)) is not None])
    traces = [r.get("trace") for r in results if r.get("ok")]
    return report.pooled(registry.run_pooled(runs) if len(runs) > 1 else [], traces)


def isolate(backend, isolated: bool):
    """(backend to decode on, lock to hold): with `isolated`, a copy with private models (and
    head drafter, issue 35), or, for a pair too large to copy, the shared one under a lock."""
    if not isolated or not all(hasattr(m, "parameters") for m in (backend.edge, backend.cloud)):
        return backend, contextlib.nullcontext()
    models = {id(m): m for m in (backend.edge, backend.cloud)}
    if sum(p.numel() for m in models.values() for p in m.parameters()) > COPY_LIMIT:
        return backend, _SHARED
    own = copy.copy(backend)
    own.edge = copy.deepcopy(backend.edge).eval()      # one copy when both are the same model
    own.cloud = own.edge if backend.cloud is backend.edge else copy.deepcopy(backend.cloud).eval()
    if getattr(backend, "head", None) is not None:
        own.head = copy.deepcopy(backend.head).eval()
    return own, contextlib.nullcontext()
