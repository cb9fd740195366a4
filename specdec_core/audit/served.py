"""A served engine's greedy runs, read from outside: the requests (prompt ids sent as ids, top
log-probs, the per-request speculative metrics), the reference's greedy output (the local
cloud model or a second server) and the replayed drafter (its folder, or the n-gram rule)."""
from __future__ import annotations

import json
from pathlib import Path

from specdec_core.audit import engines
from specdec_core.audit.engines import TOP, Served  # noqa: F401  (re-exported)
from specdec_core.backends.openai_client import CompletionsClient, RemoteError, token_id
from specdec_core.backends.remote import _pick_model
from specdec_core.errors import UserError

HINT = "start it with `make cloud-spec` or check its URL"


class Engine:
    """One OpenAI-compatible server: its kind (engines.identify), version, model, window and whether it
    speculates at all. `complete` is vLLM's adapter (llama-server's: engines.complete)."""

    def __init__(self, url: str, model: str | None = None, timeout: float = 300.0):
        self.client = CompletionsClient(url, timeout, role="served engine", hint=HINT)
        self.url = self.client.url
        try:
            self.model, self.max_model_len = _pick_model(self.client, model)
        except RemoteError as e:
            raise RemoteError(f"{e}; nothing was judged", e.detail) from None
        self.kind, self.version = engines.identify(self.client)
        self.speculates = self._speculates() if self.kind == engines.VLLM else engines.speculates(self.client)

    def _speculates(self) -> bool | None:
        """From vLLM's Prometheus text: whether `vllm:spec_decode_*` counters exist; None when
        the server shows no vLLM metrics."""
        try:
            text = self.client.request("GET", "/metrics").data.get("text") or ""
        except RemoteError:
            return None
        return ("vllm:spec_decode" in text) if "vllm:" in text else None

    def complete(self, prompt: list[int], max_tokens: int, stream: str | None = None, rep=None) -> Served:
        """stream: None | "usage" | "no-usage" (stream_options.include_usage, on whose final
        chunk vLLM sends the metrics). rep: the replay, for an engine that sends totals only."""
        if self.kind == engines.LLAMA:
            return engines.complete(self, prompt, max_tokens, stream, rep)
        body = {"model": self.model, "prompt": prompt, "max_tokens": max_tokens, "n": 1,
                "temperature": 0.0, "logprobs": TOP, "return_tokens_as_token_ids": True}
        if stream:
            body.update(stream=True, stream_options={"include_usage": stream == "usage"})
        data = self.client.request("POST", "/v1/completions", body).data
        if "events" in data:
            data = _joined(data["events"])
        try:
            choices = data["choices"]
            lp = choices[0]["logprobs"]
            ids = [token_id(t) for t in lp["tokens"]]
            top = [{token_id(k): float(v) for k, v in (row or {}).items()} for row in lp["top_logprobs"]]
        except (KeyError, IndexError, TypeError, ValueError):
            raise RemoteError(f"served engine {self.url} sent completions without token log-probs "
                              f"(needs an OpenAI-compatible `logprobs`)") from None
        spec = ((data.get("metrics") or {}).get("speculative_decoding")
                if isinstance(data.get("metrics"), dict) else None)
        out = Served(list(prompt), ids, top, spec if isinstance(spec, dict) else None,
                     str(choices[0].get("finish_reason") or ""))
        if out.spec is None and stream and "usage" not in data:
            out.notes.append("the stream carried no usage chunk (stream_options.include_usage off, "
                             "or dropped on the way): vLLM sends the speculative metrics on that "
                             "chunk only; the output is judged, acceptance and counters are not")
        elif out.spec is None:
            out.notes.append(("the engine runs no speculative decoding (no vllm:spec_decode_* counters)"
                              if self.speculates is False else "the engine sends no per-request speculative "
                              "metrics (start vLLM >= 0.29 with --per-request-spec-decode-metrics detailed)")
                             + ": its output is judged against the reference, acceptance and counters are not")
        elif "per_step_accepted" not in out.spec and out.spec.get("num_spec_steps"):
            out.notes.append("the engine sends summary metrics only (--per-request-spec-decode-"
                             "metrics summary): counters judged, acceptance by position not")
        return out

    def close(self) -> None:
        self.client.close()


def _joined(events: list[dict]) -> dict:
    """A streamed completion as one reply: the chunks' tokens in order, the last finish reason,
    the usage chunk's usage and metrics."""
    lp, finish, out = {"tokens": [], "top_logprobs": []}, None, {}
    for ev in events:
        for c in ev.get("choices") or []:
            for key in lp:
                lp[key] += (c.get("logprobs") or {}).get(key) or []
            finish = c.get("finish_reason") or finish
        out.update({k: ev[k] for k in ("usage", "metrics") if ev.get(k) is not None})
    return {"choices": [{"logprobs": lp, "finish_reason": finish}], **out}


# -- the reference ------------------------------------------------------------------------------
def reference_local(backend, prompt_ids: list[int], n: int) -> tuple[list[int], list[dict]]:
    """The local cloud model's greedy output (no speculation; decoding/baseline.greedy), exactly n
    tokens (no stop: the served run's own length bounds the comparison), with each position's
    top-2 log-probs {id: lp}."""
    import torch

    from specdec_core.decoding.baseline import greedy

    cloud, vocab = getattr(backend, "cloud", None), getattr(backend, "shared_vocab", None)
    if cloud is None or not callable(cloud):
        raise UserError("--reference local needs a backend with a local cloud model; "
                        "give --reference URL (a server without speculation)")
    ids, logits = greedy(cloud, prompt_ids, n, keep_logits=True, vocab=vocab)
    vals, idx = torch.topk(torch.log_softmax(logits[:, :vocab], -1), TOP)
    return ids, [{int(i): float(v) for i, v in zip(ii, vv)} for ii, vv in zip(idx, vals)]


def reference_served(url: str, model: str | None, prompt_ids: list[int], n: int) -> tuple[list[int], list[dict]]:
    ref = Engine(url, model)
    try:
        got = ref.complete(prompt_ids, n)
    finally:
        ref.close()
    return got.ids, got.top


# -- the replayed drafter ---------------------------------------------------------------------
class Replay:
    """Proposes what the declared drafter would draft after a context: `ngram` (vLLM's rule:
    the longest suffix n-gram, min..max, at its earliest earlier match) or a draft model folder
    run greedily here. `window`: the folder's max_position_embeddings."""

    def __init__(self, spec: str, ngram: tuple[int, int] = (1, 3), max_model_len: int | None = None):
        self.kind, self.window, self.model = "ngram", None, None
        self.lo, self.hi = ngram
        self.max_len = max_model_len or 10**9
        if spec != "ngram":
            path = Path(spec)
            try:
                cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                raise UserError(f"--replay {spec}: not a model folder with a config.json "
                                "(give the drafter's folder, or ngram)") from None
            self.kind, self.window = "draft", cfg.get("max_position_embeddings")
            from specdec_core.backends.hf import load_causal_lm

            self.model = load_causal_lm(str(path), "drafter")
        self.name = spec

    def propose(self, ctx: list[int], k: int) -> list[int]:
        if self.kind == "ngram":
            return ngram_propose(ctx, self.lo, self.hi, k, self.max_len)
        from specdec_core.decoding.baseline import greedy

        return greedy(self.model, ctx, k)[0]


def ngram_propose(ctx: list[int], lo: int, hi: int, k: int, max_len: int = 10**9) -> list[int]:
    """vLLM's n-gram proposer (v1/spec_decode/ngram_proposer.py) written plainly."""
    k = min(k, max_len - len(ctx))
    if k <= 0 or len(ctx) < lo:
        return []
    for n in range(min(hi, len(ctx) - 1), lo - 1, -1):
        suffix = ctx[-n:]
        for s in range(len(ctx) - n):
            if ctx[s:s + n] == suffix:
                return ctx[s + n:s + n + k]
    return []
