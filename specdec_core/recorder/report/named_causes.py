"""Two greedy lossless violations named from where they sit (issue 42): the declared target
penalty not applied (every wrong token is the cloud's unpenalised argmax), and the first draft
of each block committed unverified (ohdearquant/lattice #243: every wrong acceptance at block
position 0, the verify row that should have judged it computed and ignored)."""
from __future__ import annotations

from specdec_core.findings import fact, finding
from specdec_core.recorder.checks.chain.causes import edge_correction_cause


def penalty_cause(e, bad) -> str | None:
    R = e.declared.get("target_repetition_penalty")
    if not R or not bad or not all("raw_argmax" in f.rows for _, f, _ in bad):
        return None
    if not all(f.rows["raw_argmax"][r] == e.t.C[p] for p, f, r in bad):
        return None
    drafts = [(f, r, x) for f, r, x in e.samples if "penalised_argmax" in f.rows]
    on_drafts = any(f.rows["penalised_argmax"][r] == x != f.rows["argmax"][r] for f, r, x in drafts)
    where = ("it is applied to the drafts only (the drafts follow the penalised edge, the "
             "verify step the plain cloud)" if on_drafts else "the loop ignores it")
    return (f"the declared target_repetition_penalty={R:g} is not applied to the output: at all "
            f"{len(bad)} position(s) the committed token is the cloud's unpenalised argmax and "
            f"the penalised choice differs; {where}")


def first_draft_cause(rounds, bad) -> str | None:
    """Every wrong token an accepted draft at block position 0 whose round's own verify forward
    computed the row that decides it."""
    if len(bad) < 2:       # one wrong token at position 0 could be any loose test
        return None
    by_start = {r.block_start: r for r in rounds if r.verified and r.accepted}
    if any(by_start.get(p) is None for p, _, _ in bad) or any(r.verified and r.block and not r.accepted for r in rounds):
        return None     # a round whose first draft was judged and rejected: the test does start there
    p, f, r = bad[0]
    own = f.i == by_start[p].cloud.i
    which = "the round's own verify forward" if own else "an earlier cloud forward"
    return (f"the first draft of each block is committed unverified: all {len(bad)} wrong "
            f"acceptance(s) sit at block position 0, and the row that should have judged each "
            f"was computed and ignored (first at position {p}: {which}, cloud forward {f.i}, "
            f"row {r}); the comparison starts at the second draft")


def name(found: list, e) -> list:
    """lossless_violation findings with the named cause when the evidence (`e`) fits one."""
    if not any(f["code"] == "lossless_violation" for f in found):
        return found
    bad = e.t.not_argmax()
    key, cause = "penalty_not_applied", penalty_cause(e, bad)
    if cause is None:
        key, cause = "first_draft_unverified", first_draft_cause(e.rounds, bad)
    if cause is None:
        key, cause = "edge_correction_unjudged", edge_correction_cause(e.rounds, bad, e.texts)
    if cause is None:
        return found
    short, fix = {k: (t, fx) for k, t, fx in fact("lossless_violation", "named")}[key]
    return [finding(f["code"], f"{f['title']}: {short}", f["detail"], cause, fix,
                    {**f["evidence"], "named": key}, severity=f["severity"],
                    explained_by=f["explained_by"])
            if f["code"] == "lossless_violation" else f for f in found]
