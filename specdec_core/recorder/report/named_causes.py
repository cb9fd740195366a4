"""Two greedy lossless violations named from where they sit (issue 42): the declared target
penalty not applied (every wrong token is the cloud's unpenalised argmax), and the first draft
of each block committed unverified (ohdearquant/lattice #243: every wrong acceptance at block
position 0, the verify row that should have judged it computed and ignored)."""
from __future__ import annotations

from specdec_core.findings import finding


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
    if any(by_start.get(p) is None for p, _, _ in bad):
        return None
    p, f, r = bad[0]
    own = f.i == by_start[p].cloud.i
    which = "the round's own verify forward" if own else "an earlier cloud forward"
    return (f"the first draft of each block is committed unverified: all {len(bad)} wrong "
            f"acceptance(s) sit at block position 0, and the row that should have judged each "
            f"was computed and ignored (first at position {p}: {which}, cloud forward {f.i}, "
            f"row {r}); the comparison starts at the second draft")


# the named causes: (short title, fix)
NAMED = {"penalty_not_applied": ("the declared repetition penalty is not applied",
                                 "apply the declared penalty to the cloud's logits of every verified "
                                 "slot (given the sequence and the drafts before it) before its argmax / sampling"),
         "first_draft_unverified": ("the first draft of each block is committed unverified",
                                    "compare draft 0 with the verify row at the position before it "
                                    "(row 0 of the block), as every other draft")}


def name(found: list, e) -> list:
    """lossless_violation findings with the named cause when the evidence (`e`) fits one."""
    if not any(f["code"] == "lossless_violation" for f in found):
        return found
    bad = e.t.not_argmax()
    key, cause = "penalty_not_applied", penalty_cause(e, bad)
    if cause is None:
        key, cause = "first_draft_unverified", first_draft_cause(e.rounds, bad)
    if cause is None:
        return found
    short, fix = NAMED[key]
    return [finding(f["code"], f"{f['title']}: {short}", f["detail"], cause, fix,
                    {**f["evidence"], "named": key}, severity=f["severity"],
                    explained_by=f["explained_by"])
            if f["code"] == "lossless_violation" else f for f in found]


def first_draft_sampled(out: list, data: dict, level: float, scope: str) -> list:
    """Under sampling: no judged draft at block position 0 was ever rejected, which has
    probability prod(min(1, p/q)) under the rule, while drafts further in are rejected."""
    import math

    pos0 = data.get("pos0") or []
    J0 = [j for j, z in zip(data["judged"], pos0) if z] if len(pos0) == len(data["judged"]) else []
    later_rejected = data.get("later_rejected", 0)
    if not J0 or not all(j[1] for j in J0) or not later_rejected:
        return out
    logp = sum(math.log(j[0]) for j in J0)
    if logp >= math.log(level):
        return out
    return [f for f in out if f["code"] != "acceptance_rule"] + [finding(
        "acceptance_rule", "the first draft of each block is never rejected: committed unverified",
        f"{scope}: all {len(J0)} judged drafts at block position 0 were accepted (probability "
        f"{math.exp(logp):.1e} under min(1, p/q)), while {later_rejected} drafts further in "
        "were rejected; the verify row that judges draft 0 was computed and ignored",
        "the acceptance loop starts at the second draft (ohdearquant/lattice #243): draft 0 is "
        "committed whatever the cloud's row at the position before it says",
        NAMED["first_draft_unverified"][1], {"model": "cloud", "forward": J0[0][3], "position": J0[0][4],
                         "tokens": [J0[0][5]], "named": "first_draft_unverified",
                         "n_block_starts": len(J0), "p_value": math.exp(logp)})]
