"""Acceptance that collapses from a position on (issue 48, item 3): the verified rounds from some output position to
the end accept (almost) nothing, a drafter past its length limit (vllm #58080: dummy drafts verified every step) or
one whose context broke there; the position by the one change-point rule (analysis/changepoint.py), as the audit's.
Said with the position, the rounds that drafted for nothing and the forwards they cost. Read from the trace's
rounds, so `record` and `run` alike; a whole run below 30% only where a prompt type is declared, as before."""
from __future__ import annotations

from specdec_core.analysis.changepoint import change_point
from specdec_core.findings import finding
from specdec_core.recorder.checks.registry import check, ev

MIN_ROUNDS = 6         # verified rounds in the collapsed tail
LOW = 0.3              # a whole run below this is a collapse too (the built-in rule)


@check("acceptance_collapse", order=310)
def acceptance_collapse(e) -> list:
    rounds = e.trace.rounds
    vr = [r for r in rounds if r.verified and r.drafted]
    if len(vr) < 3:
        return []
    acc = lambda rs: sum(r.accepted for r in rs) / max(1, sum(r.drafted for r in rs))  # noqa: E731
    # min_before 0: a run collapsed from its first round (its first MIN_ROUNDS accept nothing) has the position 0
    cp = change_point([(r.start, r.drafted, r.accepted) for r in vr], min_before=0, min_after=MIN_ROUNDS)
    if cp is None:
        if acc(vr) >= LOW or not e.declared.get("prompt_type"):   # the whole run: a task's
            return []                                            # expectation, as before
        m = e.trace.metrics
        return [finding("acceptance_collapse", f"acceptance collapse: {acc(vr):.0%} of drafted tokens accepted",
                        f"{len(vr)} cloud calls, mean accepted length {m.get('mean_accepted_length')}",
                        "the edge drafts from a wrong context or a distorted distribution",
                        "check cache rollback, positions and draft-side penalties; lower k",
                        ev(model="edge", acceptance=round(acc(vr), 4), cloud_calls=len(vr)))]
    tail, before, pos = vr[cp["index"]:], vr[:cp["index"]], cp["position"]
    dead, drafts = [r for r in tail if r.accepted == 0], cp["drafts_wasted"]
    by_n = {r.n: r for r in e.rounds}
    edge_fw = sum(len(by_n[r.round].edge) for r in tail if r.round in by_n)
    out_tail = sum(r.committed for r in rounds if r.start >= pos)
    was = f" (before it: {cp['rate_before']:.0%} over {len(before)} rounds)" if before else ""
    return [finding(
        "acceptance_collapse", f"acceptance collapses from output position {pos} on: "
        f"{cp['rate_after']:.0%} of {sum(r.drafted for r in tail)} drafts accepted in the last {len(tail)} rounds{was}",
        f"{len(dead)} of those {len(tail)} rounds drafted for nothing; the cloud scored {drafts} "
        f"rejected drafts in {len(tail)} forwards for {out_tail} output tokens (about one forward per "
        f"token, as decoding alone)" + (f", and the drafter spent {edge_fw} forwards on them" if edge_fw else
                                        ", with no drafting forward behind them (placeholder drafts)"),
        "from this position on the drafts never match the cloud: the drafter cannot take the "
        "context past this length (its position limit or window; placeholder drafts verified "
        "anyway) or its context broke there",
        "stop drafting where the drafter cannot draft (decode with the cloud alone, or feed the "
        "drafter a window it can take), or fix the drafter's context from that position",
        {"model": "edge", "forward": None, "position": pos, "tokens": None, "round": tail[0].round,
         "rounds_wasted": len(dead), "drafts_wasted": drafts, "cloud_forwards": len(tail),
         "edge_forwards": edge_fw, "acceptance_after": cp["rate_after"], "acceptance_before": cp["rate_before"]})]
