"""The measured cost model of speculative decoding (bench `cost_model`, issue 20): pure functions
of measured forward costs, loop overhead and per-position acceptance -> predicted speedup and
advised k. Measuring is cost_probe.py; the formulas and what each cost means are in
docs/benchmarks.md, "The measured cost model"."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

FORMULA = ("speedup = (F_loop + n·(v(1) + o_tok)) / (F_sd + n·E_round/E_tok); "
           "E_tok = 1 + Σ_i s_i, s_i = p_1·…·p_i; E_round = e(1) + s_k·(e(2) − e(1)) + (k−1)·e_w + v(k+1) + o(k)")


def fit_line(xs, ys) -> tuple[float, float]:
    """Least-squares a, b of y = a + b·x (b = 0 with fewer than two distinct x)."""
    xs, ys = list(xs), list(ys)
    if len(set(xs)) < 2:
        return (statistics.fmean(ys) if ys else 0.0), 0.0
    b, a = statistics.linear_regression(xs, ys)
    return a, b


@dataclass
class Costs:
    """Seconds, measured. `edge` / `cloud`: forward time by width at the run's typical cache length
    (unmeasured widths from the least-squares line). `round_overhead`: a round's time outside the
    forwards at `k_ref`, + `overhead_per_k` per extra draft token. `token_overhead`: the cloud-only
    loop's, per token. `decode_sd` / `decode_loop`: per-decode fixed costs."""
    edge: dict[int, float]
    cloud: dict[int, float]
    round_overhead: float = 0.0
    k_ref: int = 1
    overhead_per_k: float = 0.0
    token_overhead: float = 0.0
    decode_sd: float = 0.0
    decode_loop: float = 0.0
    edge_warm: float | None = None   # edge 1-token forward right after an edge forward (None: e(1))
    _fits: dict = field(default_factory=dict, repr=False, compare=False)

    def fit(self, role: str) -> tuple[float, float]:
        if role not in self._fits:
            pts = getattr(self, role)
            self._fits[role] = fit_line(pts, [pts[w] for w in pts])
        return self._fits[role]

    def forward(self, role: str, width: int) -> float:
        pts = getattr(self, role)
        if width in pts:
            return pts[width]
        a, b = self.fit(role)
        return max(0.0, a + b * width)

    def warm(self) -> float:
        """An edge draft forward after the first of a round (its weights still in cache)."""
        return self.forward("edge", 1) if self.edge_warm is None else self.edge_warm

    def overhead(self, k: int) -> float:
        return max(0.0, self.round_overhead + self.overhead_per_k * (k - self.k_ref))

    @classmethod
    def from_dict(cls, d: dict) -> "Costs":
        """The inverse of to_dict (bench JSON `cost_model` -> Costs)."""
        pts = {role: {w: v for w, v in zip(d["widths"], d[f"{role}_s"]) if v is not None} for role in ("edge", "cloud")}
        fixed = d.get("decode_fixed_s", {})
        return cls(edge=pts["edge"], cloud=pts["cloud"], round_overhead=d.get("round_overhead_s", 0.0),
                   k_ref=d.get("k_ref", 1), overhead_per_k=d.get("overhead_per_k_s", 0.0),
                   token_overhead=d.get("loop_token_overhead_s", 0.0),
                   decode_sd=fixed.get("sd", 0.0), decode_loop=fixed.get("loop", 0.0),
                   edge_warm=d.get("edge_warm_s"))

    def to_dict(self) -> dict:
        ws = sorted(set(self.edge) | set(self.cloud))
        fit = {r: dict(zip(("a_s", "b_s_per_token"), (round(v, 7) for v in self.fit(r)))) for r in ("edge", "cloud")}
        return {"widths": ws,
                "edge_s": [round(self.edge[w], 7) if w in self.edge else None for w in ws],
                "edge_warm_s": None if self.edge_warm is None else round(self.edge_warm, 7),
                "cloud_s": [round(self.cloud[w], 7) if w in self.cloud else None for w in ws],
                "fit": fit,
                "round_overhead_s": round(self.round_overhead, 7), "k_ref": self.k_ref,
                "overhead_per_k_s": round(self.overhead_per_k, 7),
                "loop_token_overhead_s": round(self.token_overhead, 7),
                "decode_fixed_s": {"sd": round(self.decode_sd, 6), "loop": round(self.decode_loop, 6)}}


def survival(profile, k: int) -> list[float]:
    """s_i = p_1 · … · p_i for i = 1..k (positions past the profile reuse its last value)."""
    out, s = [], 1.0
    for i in range(k):
        p = profile[min(i, len(profile) - 1)] if profile else 0.0
        s *= p if p is not None else 0.0
        out.append(s)
    return out


def tokens_per_round(profile, k: int) -> float:
    """Expected tokens committed per verified round: accepted drafts plus the correction/bonus."""
    return 1.0 + sum(survival(profile, k))


def round_time(profile, k: int, costs: Costs) -> float:
    """Expected wall time of one classic round at k (see the module docstring)."""
    s_k = survival(profile, k)[-1] if k else 0.0
    e1, e2 = costs.forward("edge", 1), costs.forward("edge", 2)
    edge = e1 + s_k * (e2 - e1) + (k - 1) * costs.warm() if k else 0.0
    return edge + costs.forward("cloud", k + 1) + costs.overhead(k)


def cloud_token_time(costs: Costs) -> float:
    return costs.forward("cloud", 1) + costs.token_overhead


def predict_speedup(profile, k: int, costs: Costs, tokens_per_decode: float | None = None) -> float:
    """Predicted speedup of classic greedy SD at k over the cloud alone (a minimal greedy loop),
    from the conditional per-position acceptance `profile` and the measured `costs`; with
    `tokens_per_decode` the per-decode fixed costs are included (None: a long decode)."""
    per_tok_sd = round_time(profile, k, costs) / tokens_per_round(profile, k)
    per_tok_loop = cloud_token_time(costs)
    if not tokens_per_decode:
        return per_tok_loop / per_tok_sd
    n = tokens_per_decode
    return (costs.decode_loop + n * per_tok_loop) / (costs.decode_sd + n * per_tok_sd)


def advise_k(profile, costs: Costs, ks, tokens_per_decode: float | None = None) -> dict:
    """The k of `ks` with the highest predicted speedup (greedy verification gives the same
    tokens at every k, so this is pure speed), and the prediction at every k. `profile`: one
    acceptance profile for every k, or {k: profile} (each k's own, measured at that k)."""
    prof = profile if isinstance(profile, dict) else dict.fromkeys(ks, profile)
    table = [{"k": k, "predicted": round(predict_speedup(prof[k], k, costs, tokens_per_decode), 4),
              "tokens_per_round": round(tokens_per_round(prof[k], k), 4)} for k in ks]
    best = max(table, key=lambda r: r["predicted"])
    return {"k": best["k"], "predicted": best["predicted"], "by_k": table}


def trace_time(rounds, costs: Costs, k: int) -> float:
    """Predicted decode time of a trace's rounds (any mode, thresholded ones included) from the
    measured costs: per round its edge forwards (two tokens for the first one after a fully
    accepted verified block), its cloud forward at the width it really fed, and o(k); plus the
    per-decode fixed cost. `rounds`: RoundRecords or dicts (drafted, verified, accepted, cloud_fed)."""
    t, bonus = costs.decode_sd, False
    e1, e2 = costs.forward("edge", 1), costs.forward("edge", 2)
    for r in rounds:
        g = r.get if isinstance(r, dict) else (lambda key, _r=r: getattr(_r, key))
        drafted = g("drafted")
        if drafted:
            t += e1 + (e2 - e1) * bonus + (drafted - 1) * costs.warm()
        if g("verified"):
            t += costs.forward("cloud", max(1, g("cloud_fed")))
            bonus = g("accepted") == drafted
        else:
            bonus = False
        t += costs.overhead(k)
    return t


def loop_time(tokens: int, costs: Costs) -> float:
    """Predicted time of the cloud-only loop producing `tokens` tokens (one decode)."""
    return costs.decode_loop + tokens * cloud_token_time(costs)


def conditional_acceptance(rounds) -> dict:
    """Per-position conditional acceptance from verified rounds: p_i = (rounds whose draft i was
    accepted) / (rounds whose draft i was judged, i.e. drafted ≥ i and drafts 1..i-1 accepted).
    `rounds`: RoundRecords or dicts with drafted, verified, accepted."""
    judged, accepted = [], []
    for r in rounds:
        g = r.get if isinstance(r, dict) else (lambda key, _r=r: getattr(_r, key))
        if not g("verified"):
            continue
        d, a = g("drafted"), g("accepted")
        for i in range(min(d, a + 1)):        # positions 0..a judged (a rejected, if a < d)
            if i == len(judged):
                judged.append(0)
                accepted.append(0)
            judged[i] += 1
            accepted[i] += i < a
    profile = [round(a / n, 4) if n else None for a, n in zip(accepted, judged)]
    return {"profile": profile, "judged": judged, "accepted": accepted}


def trace_speedup(rounds_per_decode: list, ref: list, costs: Costs, k: int) -> float:
    """Predicted speedup of decodes with these rounds (one list per decode) over the cloud loop
    producing `ref` (its output per decode): sums of trace_time and loop_time."""
    loop = sum(loop_time(len(r), costs) for r in ref)
    sd = sum(trace_time(rs, costs, k) for rs in rounds_per_decode)
    return loop / sd if sd > 0 else float("inf")


# the cost model's predictions agree with measured speeds to about 10% (docs/benchmarks.md):
# a tree is advised only past that
TREE_MARGIN = 0.10


def tree_advice(costs: Costs, k: int, branch: int, nodes: int, mal: dict) -> dict:
    """Whether a tree pays here: the per-token time of a chain round at k against a dynamic tree
    round (one edge forward for the root, k - 1 more of `branch` nodes, one cloud verify forward
    `nodes` + 1 wide), each divided by its measured mean acceptance length (`mal`: chain, dynamic).
    The verify forward is priced by its width from the measured forward costs: on a CPU it grows
    with width, on a GPU it is flat up to the compute bound."""
    chain = (costs.forward("edge", 1) + (k - 1) * costs.warm() + costs.forward("cloud", k + 1)
             + costs.overhead(k)) / mal["chain"]
    tree = (costs.forward("edge", 1) + (k - 1) * costs.forward("edge", branch)
            + costs.forward("cloud", nodes + 1) + costs.overhead(k)) / mal["dynamic"]
    ratio, width = chain / tree, costs.forward("cloud", nodes + 1) / costs.forward("cloud", k + 1)
    pays = ratio > 1 + TREE_MARGIN
    if pays:
        advice = f"a dynamic tree pays here: {ratio:.2f}x the chain's speed per token (draft_tree=dynamic)"
    elif ratio >= 1 - TREE_MARGIN:
        advice = (f"a tree and a chain are even here ({ratio:.2f}x, within the cost model's "
                  f"{TREE_MARGIN:.0%}): keep draft_tree=chain, the simpler one")
    else:
        advice = (f"a tree does not pay here: a {nodes + 1}-wide verify costs {width:.2f}x a "
                  f"{k + 1}-wide one; stay with chains (draft_tree=chain)")
    return {"chain_s_per_token": round(chain, 7), "tree_s_per_token": round(tree, 7),
            "verify_width_cost": round(width, 3), "tree_pays": pays, "speed_ratio": round(ratio, 3),
            "advice": advice}
