"""Auditing a served engine's speculative decoding from outside (docs/audit.md): greedy requests with top log-probs
and the per-request metrics, the reference's greedy output, an optional replay of the declared drafter, the checks
(audit/checks.py, on the registry) and a run-like report whose `trace` colours each served step as a round of ours;
two audits side by side (`compare`)."""
from __future__ import annotations

from specdec_core.analysis.divergence import common_prefix
from specdec_core.audit import checks
from specdec_core.audit.checks import Run
from specdec_core.audit.served import Engine, Replay, reference_local, reference_served
from specdec_core.decoding.trace import RoundRecord, TokenRecord, Trace
from specdec_core.recorder import finish
from specdec_core.recorder.checks import registry
from specdec_core.result import ClipResult


def audit(backend, url: str, inputs: list[tuple[str, list[int]]], model: str | None = None, reference: str = "local",
          replay: str | None = None, max_tokens: int = 48, stream: str | None = None) -> dict:
    """{"engine", "results": [{audio, ok, token_ids, text, reference, steps, trace}], "acceptance":
    {by_draft_position, by_context}, "findings"}. One greedy sequence per request (the CLI refuses -n other than 1:
    vLLM sends speculative metrics for n = 1 only)."""
    engine = Engine(url, model)
    try:
        rep = Replay(replay, max_model_len=engine.max_model_len) if replay else None
        runs = [_run(engine, backend, name, ids, reference, rep, max_tokens, stream) for name, ids in inputs]
    finally:
        engine.close()
    per = [registry.run(r, "request") for r in runs]
    results = [_result(r, backend.tokenizer, f) for r, f in zip(runs, per)]
    found = [f for fs in per for f in fs] + registry.run(runs, "run")
    return {"engine": {"kind": engine.kind, "version": engine.version, "url": engine.url,
                       "model": engine.model, "max_model_len": engine.max_model_len,
                       "speculates": engine.speculates, "replay": replay, "reference": reference},
            "results": [r.to_dict() for r in results],
            "acceptance": {"by_draft_position": checks.by_draft_position(runs), "by_context": checks.by_context(runs)},
            "findings": found}


def _run(engine, backend, name, ids, reference, rep, max_tokens, stream) -> Run:
    served = engine.complete(ids, max_tokens, stream, rep)
    ref = reference_local(backend, ids, len(served.ids)) if reference == "local" else reference_served(
        reference, None, ids, len(served.ids))
    run = Run(name, served, *ref, rep=rep, misfit=served.misfit)     # (llama-server: totals the replay misses)
    # steps back to back are a draft model's, an n-gram engine's are placed by replaying its rule; counts that
    # contradict the kind replayed: a misfit (replay_mismatch), placed as the counts allow
    placed = starts(run, None)
    run.starts = starts(run, rep) if rep is not None and rep.kind == "ngram" else placed
    if rep is not None and run.steps and run.starts is None and (placed is not None) == (rep.kind == "ngram"):
        run.misfit, run.starts = ("a draft model" if placed else "an n-gram rule"), placed
    if rep is not None and run.starts is not None and not run.misfit:
        run.replayed = [rep.propose(ids + served.ids[:s], d) for (_, d), s in zip(run.steps, run.starts)]
    return run


def starts(run: Run, rep: Replay | None) -> list[int] | None:
    """The output index each speculative step begins at. Every step drafts (a draft model): the first token comes
    from the prefill, step i after 1 + Σ_{j<i}(a_j + 1) tokens. An n-gram engine drafts only where it finds a
    match: its steps are placed by replaying the rule; None when they cannot be placed."""
    steps, n = run.steps, len(run.served.ids)
    if not steps or (run.served.spec or {}).get("per_step_start"):     # placed by engines.llama_steps
        return (run.served.spec or {}).get("per_step_start")
    pos, out = 1, []
    if rep is None or rep.kind != "ngram":
        for a, _ in steps:
            out.append(pos)
            pos += a + 1
        return out if out[-1] < n <= pos else None     # else some steps did not draft (n-gram)
    ctx, it = run.served.prompt + run.served.ids, iter(steps)
    step = next(it, None)
    while step is not None and pos < n:
        if rep.propose(ctx[:len(run.served.prompt) + pos], step[1]):
            out.append(pos)
            pos += step[0] + 1
            step = next(it, None)
        else:
            pos += 1
    return out if step is None else None


def _result(run: Run, tokenizer, found: list) -> ClipResult:
    """One audited request as the one judged result (specdec_core/result.py): its request-scope findings
    written by the one fold (its trace's diagnostics too)."""
    s = run.served
    return finish(ClipResult("audit", run.name, trace=served_trace(run, tokenizer), ids=s.ids, findings=found, extra={
        "text": tokenizer.decode(s.ids, skip_special_tokens=True), "finish": s.finish,
        "metrics": {"speculative_decoding": s.spec},
        "reference": None if run.ref_ids is None else {
            "token_ids": run.ref_ids, "matches": run.ref_ids[:len(s.ids)] == s.ids},
        "steps": [{"context": len(s.prompt) + st, "accepted": a, "drafted": d}
                  for (a, d), st in zip(run.steps, run.starts or [])]}))


def served_trace(run: Run, tokenizer) -> Trace:
    """The served run as rounds of ours: the prompt pass's token ("prefill", not a step's bonus), each step's accepted
    drafts then its corrected (a draft rejected) or bonus (all accepted) token; the replayed rejected drafts when
    replay is on. Steps that cannot be placed: one round of the whole output."""
    s = run.served
    tr = Trace(prompt_len=len(s.prompt), backend="served", ended_by=s.finish)
    # steps that cannot be placed (starts None) zip to nothing: one round of the whole output
    bounds = [(0, 0, 0)] + [(st, a, d) for (a, d), st in zip(run.steps, run.starts or [])]
    marks = sorted(bounds) + [(len(s.ids), 0, 0)]
    for r, ((st, a, d), (nxt, _, _)) in enumerate(zip(marks, marks[1:])):
        end = min(nxt, len(s.ids))
        if st >= end:
            continue
        tr.rounds.append(RoundRecord(round=r, start=st, drafted=d, verified=True, accepted=min(a, end - st),
                                     committed=end - st))
        for i in range(st, end):
            src = ("prefill" if i == 0 else "accepted" if i - st < a else "bonus" if a >= d else "corrected")
            tr.tokens.append(TokenRecord(i=i, id=s.ids[i], text=tokenizer.decode([s.ids[i]]),
                                         source=src, round=r))
        drafts = run.replayed[r - 1] if run.replayed and 0 < r <= len(run.replayed) else []
        for t in drafts[a:] if a < d else []:
            tr.rejected.append(TokenRecord(i=-1, id=t, text=tokenizer.decode([t]), source="rejected",
                                           round=r, at=st + a))
    tr.text = tokenizer.decode(s.ids, skip_special_tokens=True)
    spec = s.spec or {}
    tr.metrics = {k: spec.get(k) for k in ("mean_acceptance_length", "draft_acceptance_rate", "num_spec_steps",
                                           "num_accepted_draft_tokens", "num_draft_tokens")}
    tr.metrics["new_tokens"], tr.info["rejected_unknown"] = len(s.ids), not run.replayed   # no count without replay
    return tr


NO_FINDINGS = ("No findings in what a served engine shows: its output against the reference, its counters and "
               "its acceptance by position were judged and none fired; what is inside it (caches, positions, "
               "the drafter's context) is not visible from outside")
DEFINITIONS = {  # what each engine's figures mean, said before a difference in figures is one in behaviour
    "vllm": "vLLM: mean acceptance length = 1 + accepted drafts / steps (the step's own target token counted); its "
            "first token comes from the prompt pass, so its steps start one token after it; its counters include "
            "drafts accepted past a max_tokens cut",
    "llama.cpp": "llama.cpp: per request only the totals timings.draft_n (drafted) and draft_n_accepted (kept), no "
                 "steps (rebuilt by --replay DRAFT_DIR); its first token comes from the prompt pass, as vLLM's; it "
                 "drafts no token past n_predict",
    "ours": "our decoder: mean acceptance length = 1 + accepted drafts / cloud calls, its first round drafting from "
            "the prompt itself (no prompt-pass token)"}


def summary(rep: dict, i: int = 0) -> str:
    """One request's numbers as the page and the CLI say them: its tokens and why it stopped, the prompt pass and
    the steps, the mean acceptance length (and accepted drafts past the cut), the verdict against the reference."""
    r, ref = rep["results"][i], rep["results"][i]["reference"]
    spec, n = r["metrics"]["speculative_decoding"] or {}, len(r["token_ids"])
    steps, acc = spec.get("num_spec_steps", 0), spec.get("num_accepted_draft_tokens", 0)
    shown = sum(t["source"] == "accepted" for t in r["trace"]["tokens"])
    mean = spec.get("mean_acceptance_length", 1 + acc / steps if steps else 1.0)   # (llama-server: from the steps)
    nums = (f"{acc} of {spec.get('num_draft_tokens', 0)} drafts accepted (the engine's totals; no steps)"
            if spec and "num_spec_steps" not in spec else
            f"1 from the prompt pass + {steps} steps · mean acceptance length {mean:.2f}"
            + (f" (the engine counts {acc} accepted drafts, {acc - shown} past the {n}-token cut; the {shown} "
               f"shown: 1 + {shown}/{steps} = {1 + shown / steps:.2f})" if r["steps"] and acc > shown else "")
            if spec else ("no speculative decoding on this server" if rep["engine"]["speculates"] is False
                          else "no speculative metrics from this server") + ": output compared, acceptance not")
    return " · ".join([f"{n} tokens (finish: {r['finish'] or 'unknown'})", nums, "no reference" if ref is None else
                       "same as the reference" if ref["matches"] else "differs from the reference"])


def verdict(a: list[int], b: list[int], ref: list[int] | None, tokenizer) -> str:
    """Same output, or the first token where A and B differ and which side the reference has there."""
    i = common_prefix(a, b)
    if a == b:
        return f"Same output: A and B give the same {len(a)} tokens."
    word = lambda ids: repr(tokenizer.decode(ids[i:i + 1])) if i < len(ids) else "the end"  # noqa: E731
    has = [s for s, ids in (("A", a), ("B", b)) if ref and i < min(len(ids), len(ref)) and ids[i] == ref[i]]
    return (f"A and B first differ at token {i}: A {word(a)}, B {word(b)}" + (
        f"; the reference has {word(ref)} there: {has[0] + ' matches it' if has else 'neither matches it'}"
        if ref and i < len(ref) else "") + ".")


def compare(a: dict, b: dict, tokenizer) -> dict:
    """Two audits of the same prompts side by side (issue 57.3): per request the verdict (where the outputs first
    differ, which side matches the reference), each side's acceptance by draft position, the definitions each
    engine's figures use."""
    kinds = [x["engine"].get("kind") or "vllm" for x in (a, b)]
    return {"engines": [a["engine"]["url"], b["engine"]["url"]],
            "requests": [{"audio": ra["audio"], "same": ra["token_ids"] == rb["token_ids"], "verdict": verdict(
                ra["token_ids"], rb["token_ids"], (ra["reference"] or {}).get("token_ids"), tokenizer)}
                for ra, rb in zip(a["results"], b["results"])],
            "by_draft_position": [x["acceptance"]["by_draft_position"] for x in (a, b)],
            "definitions": list(dict.fromkeys(DEFINITIONS.get(k, f"{k}: see docs/audit.md") for k in kinds))}
