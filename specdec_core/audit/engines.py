"""Which engine answers at a URL, and llama.cpp's adapter (docs/audit.md, "What each engine
sends"): llama-server's /completion read into the audit's `Served`."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from specdec_core.backends.openai_client import RemoteError

TOP = 2                      # top log-probs asked per output token: the top-2 margin


@dataclass
class Served:
    """One greedy request: output ids, each position's top log-probs {id: lp}, the engine's
    `metrics.speculative_decoding` (None when absent) and why it stopped."""
    prompt: list[int]
    ids: list[int]
    top: list[dict]
    spec: dict | None
    finish: str = ""
    notes: list[str] = field(default_factory=list)    # what could not be read, one line each
    misfit: str | None = None     # the drafter the totals show when the replay cannot rebuild them


VLLM, LLAMA = "vllm", "llama.cpp"
MAX_K = 16               # draft lengths tried when the replay rebuilds llama-server's steps


def identify(client) -> tuple[str, str | None]:
    """(kind, version) from what the server answers: vLLM's /version,
    llama-server's /props (`build_info`) or its /v1/models entry (`owned_by` llamacpp)."""
    def get(path):
        try:
            data = client.request("GET", path).data
        except RemoteError:
            return {}
        return data if isinstance(data, dict) else {}

    if isinstance(version := get("/version").get("version"), str):
        return VLLM, version
    props = get("/props")
    if "build_info" in props or "default_generation_settings" in props:
        return LLAMA, str(props.get("build_info") or "") or None
    if any(isinstance(m, dict) and m.get("owned_by") == "llamacpp" for m in client.models()):
        return LLAMA, None
    raise RemoteError(f"served engine {client.url} is an OpenAI-compatible server of neither kind "
                      "the audit reads (vLLM answers /version, llama-server /props); nothing was judged")


def speculates(client) -> bool | None:
    """llama-server's /slots: each slot's `speculative` (a draft model loaded and a --spec-type
    that uses it); None when the endpoint is off (--no-slots) or says nothing."""
    try:
        slots = client.request("GET", "/slots").data
    except RemoteError:
        return None
    said = [s.get("speculative") for s in slots if isinstance(s, dict)] if isinstance(slots, list) else []
    return bool(said[0]) if said and isinstance(said[0], bool) else None


def complete(engine, prompt: list[int], max_tokens: int, stream: str | None = None, rep=None):
    """One greedy /completion (prompt as ids, `n_probs` 2, no prompt cache): a `Served` with the
    draft counters (0 when absent); with a draft-folder replay the steps are rebuilt (llama_steps)."""
    body = {"prompt": prompt, "n_predict": max_tokens, "temperature": 0.0, "n_probs": TOP,
            "return_tokens": True, "cache_prompt": False, "repeat_penalty": 1.0, "stream": False}
    before = counted(engine)
    data = engine.client.request("POST", "/completion", body).data
    after = counted(engine) if before else None
    try:
        ids = [int(t) for t in data["tokens"]]
        top = [{int(r["id"]): float(r["logprob"]), **{int(p["id"]): float(p["logprob"])
                                                     for p in r["top_logprobs"]}}
               for r in data["completion_probabilities"]]
        timings = data["timings"]
        assert len(top) == len(ids) and isinstance(timings, dict)
    except (KeyError, TypeError, ValueError, AssertionError):
        raise RemoteError(f"served engine {engine.url} (llama-server) sent a /completion reply "
                          "without output ids, their probabilities and timings (needs "
                          "`return_tokens`, `n_probs`); nothing was judged") from None
    spec = {"num_draft_tokens": int(timings.get("draft_n") or 0),
            "num_accepted_draft_tokens": int(timings.get("draft_n_accepted") or 0)}
    if after:     # server-wide counters: a cross-check of the reply's totals, never per-step counts
        spec["server_wide"] = {k: after[k] - before[k] for k in before}
    out = Served(list(prompt), ids, top, spec, "length" if data.get("stop_type") == "limit" else "stop")
    if stream:
        out.notes.append("llama-server sends probabilities and timings on a whole reply only: "
                         "asked unstreamed")
    steps = llama_steps(out, rep, max_tokens) if rep is not None and spec["num_draft_tokens"] else None
    if steps:
        k, acc, drafted, at = steps
        spec.update(per_step_accepted=acc, per_step_drafted=drafted, per_step_start=at,
                    num_spec_steps=len(acc), num_spec_tokens=k, steps_from="replay")
    elif spec["num_draft_tokens"]:
        out.notes.append("llama-server sends draft totals only (timings.draft_n, draft_n_accepted):"
                         " counters judged by their totals, acceptance by draft and context position"
                         " not (give --replay DRAFT_DIR)")
    if steps == ():   # every step drafts (a draft model) unless fewer drafts than steps are left
        model = spec["num_draft_tokens"] >= len(ids) - 2 - spec["num_accepted_draft_tokens"]
        out.misfit = ("a draft model" if model else "an n-gram rule") if model != (rep.kind == "draft") else (
            f"another {'draft model' if model else 'n-gram rule'}: no draft length 1..{MAX_K} of "
            "the replayed drafts gives its totals")
    return out


def counted(engine) -> dict | None:
    """llama-server's server-wide speculative counters (`--metrics`: /metrics), None when off."""
    if getattr(engine, "metrics_off", False):
        return None
    try:
        text = engine.client.request("GET", "/metrics").data.get("text") or ""
    except RemoteError:
        text = ""
    got = dict(re.findall(r"^llamacpp:spec_decode_num_(draft_tokens|accepted_tokens|drafts)_total (\d+)$",
                          text, re.M))
    engine.metrics_off = len(got) < 3
    return None if engine.metrics_off else {
        "drafted": int(got["draft_tokens"]), "accepted": int(got["accepted_tokens"]), "steps": int(got["drafts"])}


def llama_steps(served, rep, n_predict: int):
    """llama-server's steps rebuilt by replaying the declared drafter: after the prefill's token,
    each step drafts min(k, tokens left - 1) and keeps the drafts the output matches. (k, and per
    step: accepted, drafted, start) for the first draft length k whose sums are the engine's
    totals exactly; () when none is (another drafter)."""
    ids, prompt, want = served.ids, served.prompt, served.spec
    memo: dict = {}              # greedy drafts: a shorter draft is the longer one's prefix
    for k in range(1, MAX_K + 1):
        pos, acc, drafted, at = 1, [], [], []
        while pos < len(ids) and min(k, n_predict - pos - 1) > 0:
            if pos not in memo:
                memo[pos] = rep.propose(prompt + ids[:pos], MAX_K)
            d = memo[pos][:min(k, n_predict - pos - 1)]
            a = next((j for j, t in enumerate(d) if pos + j >= len(ids) or ids[pos + j] != t), len(d))
            if d:
                acc.append(a)
                drafted.append(len(d))
                at.append(pos)
            pos += a + 1
        if (sum(drafted), sum(acc)) == (want["num_draft_tokens"], want["num_accepted_draft_tokens"]):
            return k, acc, drafted, at
    return ()
