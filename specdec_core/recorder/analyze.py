"""From a recording to (trace, findings): reconstruction plus every blind check."""
from __future__ import annotations

from specdec_core.analysis.acceptance import rank_findings
from specdec_core.analysis.audio_dependence import attach, check_edge_mishears
from specdec_core.recorder import checks, dropped, omni_checks, output_checks, sampling, speed
from specdec_core.findings import finding
from specdec_core.recorder.checks import _ev
from specdec_core.recorder.rounds import build_rounds
from specdec_core.recorder.tape import build_tapes
from specdec_core.recorder.trace_build import Texts, build_trace

TEXT_KEYS = ("cycle", "template_leak", "punct_flood", "doubling")
SEVERITY = {"error": 0, "warning": 1, "info": 2, "ok": 3}


def check_structure(t, rounds, rec: dict, texts) -> list[dict]:
    out, k = [], rec.get("declared", {}).get("k")
    if k:
        long = [r for r in rounds if r.verified and len(r.block) > k]
        runs = [r for r in rounds if r.verified and (r.end - r.block_start) > k + 1]
        sizes = sorted({len(r.block) for r in rounds if r.verified and r.block})
        if long and max(sizes) > k + 1:      # lengths vary past k+1: a schedule, not a slip
            out.append(finding(
                "draft_schedule", f"draft length varies from {sizes[0]} to {sizes[-1]} per round (declared k={k})",
                f"{len(long)} of {sum(r.verified for r in rounds)} rounds drafted more than k",
                "the decoder chooses the draft length itself (e.g. transformers' heuristic "
                "num_assistant_tokens schedule or a confidence threshold); k is not what it drafts",
                "nothing to fix if intended; declare the schedule's maximum as k to compare",
                _ev(long[0].cloud, long[0].block_start, long[0].block, round=long[0].n), severity="info"))
        elif long or runs:
            r = (long or runs)[0]
            out.append(finding(
                "off_by_one", f"round {r.n} drafted {len(r.block)} and committed {r.end - r.block_start} tokens "
                f"with k={k}",
                f"{len(long)} round(s) drafted more than k, {len(runs)} committed more than k+1",
                "an off-by-one in the draft loop or the acceptance count (range(k + 1), "
                "accepting one token past the first mismatch)",
                "draft exactly k tokens; commit the accepted prefix plus one cloud token",
                _ev(r.cloud, r.block_start, r.block, round=r.n), severity="error"))
    return out


def text_findings(trace) -> list[dict]:
    from specdec_core.analysis.diagnostics import diagnose

    out = []
    for d in diagnose(trace):
        if d["code"] in TEXT_KEYS:
            out.append(finding(d["code"], d["title"], d["detail"], d["cause"],
                               d["fix"], {"model": None, "forward": None, "position": None,
                                          "tokens": None}, severity=d["severity"]))
    return out


def analyze(rec: dict, tokenizer, info=None, dependence=None):
    """recording -> (Trace, findings). The trace's diagnostics are the findings. `dependence`:
    decoding/dependence.py's result for the output, when the backend gives one."""
    rec, found = dropped.repair(rec)   # the rest reads the text the models were fed
    t = build_tapes(rec)
    rounds = build_rounds(t)
    texts = Texts(tokenizer)
    trace = build_trace(rec, t, rounds, tokenizer, info)
    attach(trace, dependence)
    d = rec.get("declared", {})
    found += checks.check_positions(t, skip_2d=bool(rec.get("mrope")))
    found += omni_checks.check_mrope(t, rec) + omni_checks.check_audio(t, rec)
    found += checks.check_contexts(t, rounds)
    found += output_checks.check_lossless(t, rounds, d, texts)
    if d.get("verify") == "rank" and not d.get("temperature"):   # a declared rank window:
        found += rank_findings(trace.tokens, d, t.P)  # the built-in decoder's rule (acceptance.py)
    found += output_checks.check_stops(t, rec, texts, rounds)
    found += checks.check_draft_rule(t, rounds, d, texts)
    found += omni_checks.check_vocab(t, rec)
    found = omni_checks.fold_vocab(found) + check_structure(t, rounds, rec, texts)
    found += speed.check_speed(rec, t)
    found = sampling.dedupe(found + sampling.check_sampling(rec))
    found += text_findings(trace) + check_edge_mishears(trace)
    found.sort(key=lambda f: SEVERITY.get(f["severity"], 9))
    trace.diagnostics = found
    return trace, found
