"""`bench --sweep`: the k sweep and the entropy-threshold sweep, and their plot, on the bench's
one interleaved timing loop (stats.time_jobs); docs/benchmarks.md."""
from __future__ import annotations

import math
import statistics
from pathlib import Path

from specdec_core.analysis.divergence import common_prefix
from specdec_core.evaluation.bench.cost_model import trace_speedup
from specdec_core.evaluation.bench.run import (RUNNERS, bench_config, cloud_loop, cost_model_speedup,
                                               decode_stats, ours, predicted_speedup)
from specdec_core.evaluation.bench.stats import ratio, time_jobs

DEFAULT_KS = tuple(range(1, 9))
# Auto thresholds: these quantiles of each block's highest draft entropy (nats; what the gate
# compares with the threshold at the default cadence) in classic mode at the benchmark's k. The
# sweep then spans the edge's own entropy range on any model pair: at quantile q, about a share q
# of the classic run's blocks would be committed without the cloud.
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)


def auto_thresholds(entropies: list[float], quantiles=QUANTILES) -> list[float]:
    """Entropy thresholds in nats spanning what the edge drafts: quantiles of `entropies`."""
    xs = sorted(entropies)
    if not xs:
        return []
    return sorted({round(xs[min(len(xs) - 1, int(q * len(xs)))], 2) for q in quantiles})


def prefix_quality(outputs: list, ref: list) -> dict:
    """Token-identical clips vs the cloud's greedy output, and the mean share of the cloud's
    output reproduced before the first differing token."""
    same = [o == r for o, r in zip(outputs, ref)]
    agree = statistics.mean(common_prefix(o, r) / max(1, len(r)) for o, r in zip(outputs, ref))
    return {"identical_clips": sum(same), "identical_share": round(sum(same) / max(1, len(same)), 4),
            "prefix_agreement": round(agree, 4)}


def _nats(t: float):
    return t if math.isfinite(t) else "inf"   # JSON has no Infinity


def run_sweeps(backend, prompts: list, c: float, k: int = 4, ks=DEFAULT_KS, thresholds=None,
               repeats: int = 3, log=print, costs=None) -> dict:
    """k sweep (classic greedy, k in `ks`) and threshold sweep at k (None = auto_thresholds). With
    `costs` every row also gets `cost_model`, the measured model's prediction from its own traces."""
    base, classic = bench_config(k=k), f"k={k}"
    configs = {f"k={x}": bench_config(k=x) for x in ks}
    configs.setdefault(classic, base)
    auto = thresholds is None
    if auto:   # one classic decode to see what entropies the edge drafts with
        thresholds = auto_thresholds(decode_stats(backend, prompts, base)["block_entropies"])
    points = {None: classic}
    for t in thresholds:
        if t is not None:
            points[float(t)] = lab = f"t={t:g}"
            configs[lab] = bench_config(k=k, entropy_threshold=float(t))
    jobs = {"cloud_only": (RUNNERS["cloud_only"], base), "cloud_loop": (cloud_loop, base)}
    jobs.update({lab: (ours(True, whole=True), cfg) for lab, cfg in configs.items()})
    times, first = time_jobs(backend, prompts, jobs, repeats, log, tag="sweep ")
    ref = first["cloud_only"]    # the cloud's greedy output, HF generate
    # counts from the traces of the first timed repeat (greedy decoding is deterministic)
    stats = {lab: decode_stats(backend, prompts, cfg, first[lab]) for lab, cfg in configs.items()}
    v = first[classic][0].info.get("vocab_size")    # |V| the decoder computed entropies on
    lnv = math.log(v) if v else None                 # (the maximum possible entropy)

    def row(lab: str, x: int, leviathan: bool = True) -> dict:
        """One point of a sweep: config `lab` at k = x."""
        st = stats[lab]
        r = {"alpha": round(st["alpha"], 4), "alpha_leviathan": round(st["alpha_leviathan"], 4),
             "tokens": st["tokens"], "cloud_calls_per_token": round(st["calls"] / max(1, st["tokens"]), 4),
             "edge_only_share": round(st["edge_only"] / max(1, st["tokens"]), 4),
             "target_forwards": st["target_forwards"], "draft_forwards": st["draft_forwards"],
             "predicted": round(cost_model_speedup(st["tokens"], st["target_forwards"], st["draft_forwards"], c), 4)}
        r["achieved_vs_loop"], r["achieved_vs_loop_range"] = ratio(times["cloud_loop"], times[lab])
        r["achieved_vs_cloud_only"], r["achieved_vs_cloud_only_range"] = ratio(times["cloud_only"], times[lab])
        r.update(prefix_quality(st["outputs"], ref))
        r["leviathan"] = round(predicted_speedup(st["alpha_leviathan"], x, c), 4) if leviathan else None
        r["cost_model"] = (None if costs is None else   # the measured model on this row's own traces
                           round(trace_speedup([tr.rounds for tr in first[lab]], ref, costs, x), 4))
        return r
    k_rows = [{"k": x, **row(f"k={x}", x)} for x in ks]
    for r in k_rows:
        log(f"k={r['k']}: alpha={r['alpha']:.3f} alpha_leviathan={r['alpha_leviathan']:.3f} "
            f"leviathan={r['leviathan']:.3f} predicted={r['predicted']:.3f} achieved={r['achieved_vs_loop']:.3f}")
    t_rows = [{"threshold": None if t is None else _nats(t),
               "threshold_frac": None if t is None or lnv is None else _nats(round(t / lnv, 4)),
               **row(lab, k, leviathan=t is None)} for t, lab in points.items()]
    for r in t_rows:
        log(f"threshold={r['threshold']}: calls/token={r['cloud_calls_per_token']:.3f} "
            f"predicted={r['predicted']:.3f} achieved={r['achieved_vs_loop']:.3f} "
            f"identical={r['identical_clips']}/{len(prompts)}")
    return {"k_sweep": k_rows, "threshold_sweep": t_rows, "sweep_repeats": repeats,
            "ln_vocab": None if lnv is None else round(lnv, 4),
            "thresholds_from": (f"auto: quantiles {list(QUANTILES)} of the blocks' highest draft "
                                f"entropy at k={k}, classic mode") if auto else "given"}


def plot_sweeps(res: dict, path: Path) -> Path | None:
    """Both sweeps side by side (PNG): speedup vs k, and speedup + output identity vs threshold."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4.4), dpi=120)

    def achieved(axis, xs, rows, label, xlabel, title):
        """The achieved speed-up (median, range) in the frame both sweeps share."""
        med = [r["achieved_vs_loop"] for r in rows]
        lo = [m - r["achieved_vs_loop_range"][0] for m, r in zip(med, rows)]
        hi = [r["achieved_vs_loop_range"][1] - m for m, r in zip(med, rows)]
        axis.errorbar(xs, med, yerr=[lo, hi], fmt="s-", capsize=3, color="C2", label=label)
        axis.axhline(1.0, color="grey", lw=0.8)
        axis.set(xlabel=xlabel, ylabel="speedup over the cloud alone")
        axis.set_title(title, fontsize=9)
        axis.grid(alpha=0.3)

    rows = res.get("k_sweep") or []
    if rows:
        ks = [r["k"] for r in rows]
        ax.plot(ks, [r["leviathan"] for r in rows], "o--", color="C0", label="Leviathan et al. (α, k, c)")
        ax.plot(ks, [r["predicted"] for r in rows], "x:", color="C1", label="cost model (counted forwards)")
        ax.set_xticks(ks)
        achieved(ax, ks, rows, "achieved vs cloud loop (median, range)", "k (draft tokens per round)",
                 "k sweep (classic greedy SD)")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    rows = res.get("threshold_sweep") or []
    finite = [r for r in rows if isinstance(r["threshold"], (int, float))]
    if finite:
        xs = [r["threshold"] for r in finite]
        bx.plot(xs, [r["predicted"] for r in finite], "x:", color="C1", label="cost model (counted forwards)")
        achieved(bx, xs, finite, "achieved vs cloud loop", "entropy threshold (nats)",
                 "entropy threshold sweep (lossy)")
        classic = next((r for r in rows if r["threshold"] is None), None)
        if classic:
            bx.axhline(classic["achieved_vs_loop"], color="C2", ls="--", lw=0.8, label="achieved, classic (null)")
        cx = bx.twinx()
        cx.plot(xs, [r["identical_share"] for r in finite], "^-", color="C3", label="identical clips")
        cx.plot(xs, [r["cloud_calls_per_token"] for r in finite], "v-", color="C4", label="cloud calls/token")
        cx.set_ylim(0, 1.05)
        cx.set_ylabel("share", fontsize=8)
        h1, l1 = bx.get_legend_handles_labels()
        h2, l2 = cx.get_legend_handles_labels()
        bx.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
