"""Where a greedy draft came from (issue 56). The row a round maps a draft to made it only if
that forward was not fed the draft itself; otherwise the draft was made earlier: its maker is the
latest edge forward before the verify whose last row gives it, fed the draft before it (a
greedy drafting chain; the block's first draft: any). A maker on a context other than
the one verified: `stale_draft_context` (a pipelined edge re-proposing the block it drafted over
rejected tokens, a drafter fed rejected tokens). No maker: `unexplained_draft`, what differs
from what and where, with no borrowed cause."""
from __future__ import annotations

from specdec_core.analysis.divergence import common_prefix
from specdec_core.findings import finding
from specdec_core.recorder.checks.registry import check, ev


def fed_by(f, r: int) -> bool:
    """Row r of forward f scored a position whose next id f was fed: f did not make that draft."""
    return f.first_q + r + 1 < f.L + f.n


def origins(e) -> tuple[list, list]:
    """(stale, unexplained) greedy drafts whose round's row was fed them and is not their argmax:
    (round, position, id, the round's forward and row, the maker or None)."""
    if float(e.declared.get("temperature") or 0.0) > 0:
        return [], []
    edge = [f for f in e.t.fwds if f.model == "edge" and f.rows]
    stale, lost = [], []
    for rnd in e.rounds:
        ref = rnd.cloud.ctx if rnd.verified else None
        if not rnd.verified or rnd.is_tree or ref[:rnd.block_start] != e.t.C[:rnd.block_start]:
            continue     # a verify off the committed text is a context finding's (chain/context.py)
        for p, (f, r) in sorted(rnd.drafted_by.items()):
            if p >= len(ref) or f.rows["argmax"][r] == ref[p] or not fed_by(f, r) or f.ctx[:p] != ref[:p]:
                continue
            prev = ref[p - 1] if p > rnd.block_start else None
            maker = next((g for g in reversed(edge) if g.i < rnd.cloud.i and g.rows["argmax"][-1] == ref[p]
                          and g.first_q + len(g.rows["argmax"]) == len(g.ctx) and prev in (None, g.ctx[-1])), None)
            (stale if maker is not None and maker.ctx != ref[:p] else lost).append((rnd, p, ref[p], f, r, maker))
    return stale, lost


@check("stale_draft_context", "unexplained_draft", scope="row", order=85)
def draft_origin(e) -> list[dict]:
    stale, lost = origins(e)
    out, texts = [], e.texts
    join = lambda ids: "".join(texts(i) for i in ids)  # noqa: E731
    if stale:
        rnd, p, x, f, r, g = stale[0]
        d = common_prefix(g.ctx, rnd.cloud.ctx[:p])
        held, verified = g.ctx[d:], rnd.cloud.ctx[d:p]
        out.append(finding(
            "stale_draft_context", f"{len(stale)} drafts were made from a context other than the one "
            f"verified (edge forward {g.i} first)",
            f"round {rnd.n}: draft {texts(x)!r} at position {p} is the last row's argmax of edge forward {g.i}, "
            f"whose context held {join(held)!r} (ids {held}) from position {d} where the verified "
            f"context holds {join(verified)!r} (ids {verified}); on the verified context the edge "
            f"gives {texts(f.rows['argmax'][r])!r} (forward {f.i})",
            "drafts proposed after a correction were drafted before it, over tokens the cloud "
            "rejected (a block drafted ahead re-proposed, a drafter fed rejected tokens)",
            "after a rejection, draft again from the committed text and the correction; keep a block "
            "drafted ahead only when the whole block it assumed was accepted",
            ev(g, p, {"drafted": x, "edge_on_verified": f.rows["argmax"][r]}, verify_forward=rnd.cloud.i,
               context_from=d, context_held=held, context_verified=verified, n_drafts=len(stale))))
    if lost:
        rnd, p, x, f, r, _ = lost[0]
        out.append(finding(
            "unexplained_draft", f"{len(lost)} drafts match no edge row that could have made them",
            f"round {rnd.n}: draft {texts(x)!r} (id {x}) at position {p} was fed to edge forward {f.i}, "
            f"whose row there gives {texts(f.rows['argmax'][r])!r} (id {f.rows['argmax'][r]}); no edge "
            f"forward before verify forward {rnd.cloud.i} gave it after {texts(rnd.cloud.ctx[p - 1])!r}",
            "not named: the drafts come from somewhere the recording does not show (another "
            "drafter, a list kept by the loop, processing outside the edge's rows)",
            "check where the loop's drafts come from between the edge's forwards and the verify",
            ev(f, p, {"drafted": x, "edge_argmax": f.rows["argmax"][r]}, verify_forward=rnd.cloud.i,
               n_drafts=len(lost))))
    return out
