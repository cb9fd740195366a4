"""`bench` advice (issue 20 item 3): the k and entropy threshold the measured cost model says are
fastest (a threshold only within `quality_cost`), and `check_advice`, a rerun that checks the
prediction (docs/benchmarks.md, "Advice")."""
from __future__ import annotations

import math

from specdec_core.decoding.decoder import SpeculativeDecoder
from specdec_core.evaluation.bench import cost_model as cm
from specdec_core.evaluation.bench.cost_probe import default_clock, mean, timed
from specdec_core.evaluation.bench.run import RUNNERS, bench_config, cloud_loop
from specdec_core.evaluation.bench.stats import ratio, time_jobs
from specdec_core.evaluation.bench.sweep import auto_thresholds, prefix_quality

QUALITY_BUDGET = 0.10
TOLERANCE = 0.15
# A lossy threshold is advised only when it is predicted at least this much faster than classic
# mode at the same k: the model's own error is a few percent, and trading output for less would
# be advice the measurement cannot back.
MIN_GAIN = 0.05


def _pass(backend, prompts, cfg) -> dict:
    """One traced decode per prompt under forward_timer: rounds, outputs, time outside forwards
    (on the clock the cost probe uses, cost_probe.default_clock)."""
    rounds, outputs, spans = [], [], []
    clock = default_clock(backend)[0]
    for p in prompts:
        tr, _, over = timed(backend, clock, lambda: SpeculativeDecoder(backend, cfg).run(p))
        rounds.append(tr.rounds)
        outputs.append(tr.token_ids)
        spans += over["rounds"]
    return {"rounds": rounds, "outputs": outputs, "overhead": mean(spans)}


def quality(outputs: list, ref: list) -> dict:
    """Identical clips and quality cost (1 − mean prefix agreement) against the cloud's output."""
    q = prefix_quality(outputs, ref)
    return {"identical_clips": q["identical_clips"], "quality_cost": round(1 - q["prefix_agreement"], 4)}


def advise(backend, prompts, costs: cm.Costs, ref: list | None, ks, thresholds=None,
           budget: float = QUALITY_BUDGET, log=print) -> dict:
    """The advised k (classic greedy) and entropy threshold (within `budget`), with predictions.
    `ref`: the cloud's greedy output per prompt (None: decoded here); `thresholds`: nats (None:
    quantiles of the blocks' highest draft entropy at the advised k)."""
    ks = sorted(set(ks) | {costs.k_ref})
    if ref is None:
        ref = [cloud_loop(backend, p, bench_config(k=costs.k_ref)) for p in prompts]
    passes = {k: _pass(backend, prompts, bench_config(k=k)) for k in ks}
    # o(k): the slope of the passes' mean round overhead, through the main run's own value at k_ref
    a, b = cm.fit_line(ks, [passes[k]["overhead"] for k in ks])
    scale = costs.round_overhead / passes[costs.k_ref]["overhead"] if passes[costs.k_ref]["overhead"] else 1.0
    costs.overhead_per_k = b * scale
    # each k's own acceptance profile: where rounds start (after a correction or a bonus token)
    # depends on k, and so does the acceptance at the first positions
    acc = {k: cm.conditional_acceptance(r for rs in passes[k]["rounds"] for r in rs) for k in ks}
    n = sum(len(r) for r in ref) / max(1, len(ref))
    best = cm.advise_k({k: a["profile"] for k, a in acc.items()}, costs, ks, n)
    for row in best["by_k"]:
        row["round_overhead_s"] = round(costs.overhead(row["k"]), 7)
        row["pass_overhead_s"] = round(passes[row["k"]]["overhead"], 7)
        row["identical_clips"] = sum(o == r for o, r in zip(passes[row["k"]]["outputs"], ref))
        row["acceptance_profile"] = acc[row["k"]]["profile"]
    k = best["k"]
    log(f"advice: k={k} predicted {best['predicted']:.3f} (" + ", ".join(
        f"k={r['k']}: {r['predicted']:.3f}" for r in best["by_k"]) + ")")
    rows = _threshold_rows(backend, prompts, passes[k], ref, costs, k, thresholds, log)
    classic = rows[0]["predicted"]
    ok = [r for r in rows[1:] if r["quality_cost"] <= budget]
    best_t = max(ok, key=lambda r: r["predicted"]) if ok else None
    pick = best_t if best_t and best_t["predicted"] >= classic * (1 + MIN_GAIN) else rows[0]
    return {"k": k, "predicted": best["predicted"], "by_k": best["by_k"],
            "overhead_fit": {"a_s": round(a, 7), "b_s_per_k": round(b, 7), "scale_to_main_run": round(scale, 4),
                             "overhead_per_k_s": round(costs.overhead_per_k, 7)},
            "tokens_per_decode": round(n, 2), "lossless": "greedy verification: every k gives the same tokens",
            "quality_budget": budget,
            "quality_cost": "1 − mean prefix agreement with the cloud's greedy output",
            "min_gain": MIN_GAIN, "classic_predicted": classic,
            "best_within_budget": None if best_t is None else {
                "threshold": best_t["threshold"], "predicted": best_t["predicted"],
                "gain_over_classic": round(best_t["predicted"] / classic - 1, 4),
                "quality_cost": best_t["quality_cost"]},
            "threshold": pick["threshold"], "threshold_predicted": pick["predicted"],
            "threshold_quality_cost": pick["quality_cost"], "thresholds": rows}


def _threshold_rows(backend, prompts, at_k: dict, ref, costs, k: int, thresholds, log) -> list:
    """Thresholds at the advised k, judged by quality cost and predicted speed (row 0: none)."""
    rows = [{"threshold": None, **quality(at_k["outputs"], ref),
             "predicted": round(cm.trace_speedup(at_k["rounds"], ref, costs, k), 4)}]
    if thresholds is None:
        thresholds = auto_thresholds([r.max_entropy for rs in at_k["rounds"] for r in rs
                                      if r.max_entropy is not None])
    for t in (t for t in thresholds if t is not None):
        ps = _pass(backend, prompts, bench_config(k=k, entropy_threshold=float(t)))
        calls = sum(r.verified for rs in ps["rounds"] for r in rs)
        toks = sum(len(o) for o in ps["outputs"])
        rows.append({"threshold": float(t) if math.isfinite(float(t)) else "inf", **quality(ps["outputs"], ref),
                     "cloud_calls_per_token": round(calls / max(1, toks), 4),
                     "predicted": round(cm.trace_speedup(ps["rounds"], ref, costs, k), 4)})
        log(f"advice: threshold {t:g} at k={k}: predicted {rows[-1]['predicted']:.3f}, "
            f"quality cost {rows[-1]['quality_cost']:.3f}, identical {rows[-1]['identical_clips']}/{len(ref)}")
    return rows


def check_advice(backend, prompts, advice: dict, repeats: int = 3, log=print) -> dict:
    """Rerun the advised k (and the advised threshold, when one is advised) interleaved with the
    cloud loop; measured speedup over the loop vs the prediction."""
    k = advice["k"]
    base = bench_config(k=k)
    jobs = {"cloud_loop": (cloud_loop, base), "advised_k": (RUNNERS["ours_traced"], base)}
    t = advice.get("threshold")
    if t is not None:
        jobs["advised_threshold"] = (RUNNERS["ours_traced"], bench_config(k=k, entropy_threshold=float(t)))
    times, _ = time_jobs(backend, prompts, jobs, repeats, log, tag="advice check ")
    out = {"repeats": repeats, "tolerance": TOLERANCE}
    for job, pred, label in (("advised_k", advice["predicted"], {"k": k}),
                             ("advised_threshold", advice.get("threshold_predicted"), {"k": k, "threshold": t})):
        if job not in times:
            continue
        got, rng = ratio(times["cloud_loop"], times[job])
        over, orng = ratio(times["cloud_loop"], [x * pred for x in times[job]])
        out[job] = {**label, "predicted": pred, "achieved_vs_loop": got, "achieved_vs_loop_range": rng,
                    "achieved_over_predicted": over, "achieved_over_predicted_range": orng,
                    "within_tolerance": abs(over - 1) <= TOLERANCE}
    out["within_tolerance"] = out["advised_k"]["within_tolerance"]
    return out
