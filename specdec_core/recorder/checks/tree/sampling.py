"""Tree loops under sampling (issue 42; docs/recorder.md, "Trees under sampling").

A multi-candidate rule (SpecInfer; EAGLE's `evaluate_posterior`) tries the children of the
accepted node in turn, each against the cloud's residual at that node, removes a rejected
child's mass and renormalises before the next, and draws the correction from what remains. The
token emitted at a node is then distributed exactly as the cloud's p there, whatever the
children. Two blind checks, per clip and pooled over clips (declared T > 0, verify=sampling):

- `sibling_resampled` (error): the loop's correction at a node equals one of the children it
  rejected there (resumed.py reads where the loop resumed). Probability 0 under the exact rule:
  the residual was not updated between siblings.
- `sibling_distribution` (error): at every node of the loop's path that has children, the
  emitted token is one of them with probability S = p(children); the number of such nodes is
  compared with Poisson-binomial(S) (two-sided exact test at ALPHA); the detail gives the excess
  per node against its noise floor (one standard deviation).

Otherwise the rule is named (`sampling_rule`, info) with what was judged, and nodes that could
not be judged (no cloud row with every child's log-prob, no logsumexp at T) are counted in one
`not_judged` finding."""
from __future__ import annotations

import math

from specdec_core.findings import finding
from specdec_core.recorder.checks.registry import check, ev, pooled_sum
from specdec_core.recorder.checks.sampling.rule import _test, applies

ALPHA = 1e-3
EDGE = 1e-3          # nodes whose children hold less than this, or all but this, carry no evidence
MIN_NODES = 5        # informative nodes needed to name the rule


def _p_at(raw: dict, row: int, j: int, T: float):
    """p at T of fed id j under row `row` of a tree forward: its `cross` log-probs, else the
    row's top-5 (a prefill fed with the tree has rows for the last positions only)."""
    rows = raw.get("rows") or {}
    cross, lse = rows.get("cross"), rows.get("lse_t")
    if not lse or not 0 <= row < len(lse) or lse[row] is None:
        return None
    if cross:
        return math.exp(cross["logp"][row][j] / T - lse[row])
    top = rows["top_ids"][row]
    x = raw["ids"][j]
    return math.exp(rows["top_logp"][row][top.index(x)] / T - lse[row]) if x in top else None


def _kids(tree: dict, ids: list, v, d: int) -> dict:
    out = {}
    for j in tree["nodes"]:
        if tree["parent"][j] == v and tree["depth"][j] == d:
            out.setdefault(ids[j], j)
    return out


def _round(raw: dict, tree: dict, C: list, P: int, T: float, cut, out: dict) -> None:
    base, path, ids = tree["base"], tree["path"], raw["ids"]
    n_loop = cut - base if cut is not None and base <= cut < base + len(path) else len(path)
    off = (raw.get("rows") or {}).get("offset") or 0
    for d in range(n_loop + 1):
        if base + d >= len(C):
            break
        if base + d < P:           # a prompt fed with the first tree reads as its path
            continue
        v = path[d - 1] if d else None
        kids = _kids(tree, ids, v, d)
        if not kids:
            continue
        row = (v if v is not None else tree["nodes"][0] - 1) - off
        ps = {x: _p_at(raw, row, j, T) for x, j in kids.items()}
        if None in ps.values():
            out["unjudged"] += 1
            continue
        e = C[base + d]
        node = {"forward": raw["i"], "position": base + d, "token": e, "inside": e in ps,
                "S": sum(ps.values()), "siblings": {x: round(p, 5) for x, p in ps.items()}}
        out["nodes"].append(node)
        if d == n_loop < len(path) and e in ps:
            out["resampled"].append(node)


def collect(e) -> dict:
    """Per tree verify forward: the nodes of the loop's path that have children (the children's
    mass S under p, whether the emitted token is one of them) and the corrections equal to a
    child the loop rejected (the canonical recording, the tree normalizer's notes, where the
    loop resumed: t.resumed)."""
    t, info, T = e.t, e.trees, applies(e.declared)
    out = {"nodes": [], "resampled": [], "unjudged": 0, "rounds": 0}
    if not T or info.get("shape") != "tree":
        return out
    for i, tree in (info.get("trees") or {}).items():
        raw = info["raw"][i]
        if raw["model"] == "cloud" and tree.get("path") is not None:
            out["rounds"] += 1
            _round(raw, tree, t.C, t.P, T, t.resumed.get(i), out)
    return out


def _stats(nodes: list) -> dict | None:
    inf = [n for n in nodes if EDGE <= n["S"] <= 1 - EDGE]
    if not inf:
        return None
    s = sum(n["inside"] for n in inf)
    e, _, _, p = _test([n["S"] for n in inf], s)
    sd = math.sqrt(sum(n["S"] * (1 - n["S"]) for n in inf))
    return {"n": len(inf), "inside": s, "expected": e, "p": p,
            "excess": (s - e) / len(inf), "floor": sd / len(inf)}


def _line(st: dict, scope: str) -> str:
    return (f"{scope}: at {st['n']} informative nodes with children the emitted token was one of "
            f"them {st['inside']} times, the cloud's p gives {st['expected']:.1f} (two-sided exact "
            f"p = {st['p']:.1e}); excess mass on the children {st['excess']:+.3f} per node against "
            f"a noise floor of {st['floor']:.3f}")


def _resampled(data: dict, st, scope: str) -> list:
    n0 = data["resampled"][0]
    sib = ", ".join(f"{x} (p {p:.3f})" for x, p in n0["siblings"].items())
    return [finding(
        "sibling_resampled", f"{len(data['resampled'])} correction(s) repeat a child rejected at the same "
        "tree node", f"{scope}: cloud forward {n0['forward']}, position {n0['position']}: the loop rejected "
        f"the children {sib} and resumed with {n0['token']}, one of them (its next forwards re-feed it), "
        "an event of probability 0 under the exact sibling rule" + ("; " + _line(st, scope) if st else ""),
        "after a child is rejected its mass is not removed from the cloud's distribution before the "
        "next child and the final draw (the residual is not updated between siblings): the output "
        "over-weights the children",
        "on each rejection set p(x) = 0 and renormalise (SpecInfer; EAGLE's evaluate_posterior: "
        "gtp[xi] = 0; gtp = gtp / gtp.sum()); draw the correction from what remains",
        {"model": "cloud", "forward": n0["forward"], "position": n0["position"], "tokens": [n0["token"]],
         "siblings": n0["siblings"], "n_resampled": len(data["resampled"]),
         "n_nodes": len(data["nodes"])})]


def judge(data: dict, scope: str) -> list[dict]:
    if not data["rounds"]:
        return []
    st = _stats(data["nodes"])
    if data["resampled"]:
        out = _resampled(data, st, scope)
    elif st and st["p"] < ALPHA:
        n0 = next(n for n in data["nodes"] if EDGE <= n["S"] <= 1 - EDGE)
        out = [finding(
            "sibling_distribution", f"the emitted token at tree nodes is not distributed as the cloud's p: "
            f"{st['inside']} of {st['n']} a child, {st['expected']:.1f} expected", _line(st, scope),
            "the multi-candidate rule does not give the cloud's distribution: children accepted with "
            "another probability than the residual's mass on them, or the correction drawn from "
            "another distribution than the residual left after the rejected children",
            "try the children in turn against the residual, removing each rejected child's mass "
            "(SpecInfer; EAGLE's evaluate_posterior)",
            {"model": "cloud", "forward": n0["forward"], "position": n0["position"], "tokens": None,
             **{k: round(v, 4) if isinstance(v, float) else v for k, v in st.items()}})]
    elif st and st["n"] >= MIN_NODES:
        out = [finding(
            "sampling_rule", "acceptance rule: multi-candidate tree (SpecInfer / EAGLE sibling rule)",
            _line(st, scope) + "; no correction repeated a rejected child",
            "children tried in turn against the cloud's residual, a rejected child's mass removed "
            "before the next: every emitted token is drawn from p", "nothing to fix",
            ev(model="cloud", rule="sibling_tree", p_value=st["p"], n_nodes=st["n"]))]
    else:
        out = []
    if data["unjudged"]:
        total = data["unjudged"] + len(data["nodes"])
        out.append(finding(
            "not_judged", f"{data['unjudged']} of {total} tree nodes with children not judged under sampling",
            f"{scope}: the verify row of those nodes lacks a child's log-prob (more than 128 nodes "
            "in one forward) or the logsumexp at the declared temperature",
            "the recorder keeps every fed id's log-prob under every row only for trees of up to "
            "128 nodes, and p at T only with a declared temperature",
            "declare the temperature (--set temperature=T); verify trees of at most 128 nodes",
            ev(model="cloud", n_not_judged=data["unjudged"], n_nodes=total)))
    return out


@check("sibling_resampled", "sibling_distribution", "sampling_rule", "not_judged", order=150,
       pooled=pooled_sum(collect, judge))
def tree_sampling(e) -> list[dict]:
    return judge(collect(e), "this run")
