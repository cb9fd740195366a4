"""Plain-text reports the CLI prints (batch summary + checklist, benchmark ratios)."""
from __future__ import annotations

from specdec_core.evaluation.batch import KEY_METRICS, BatchResult
from specdec_core.evaluation.bench import METHODS


def batch_report(result: BatchResult) -> str:
    """The summary and checklist of every configuration as plain text (CLI output)."""
    out = []
    for name, s in result.summary.items():
        out.append(f"== config {name}: {s['n']} clips, {s['ok']} ok, {s['failed']} failed")
        for e in s["errors"]:
            out.append(f"   failed  {e['name']}: {e['error']}")
        for key in KEY_METRICS:
            mu, md = s["mean"][key], s["median"][key]
            if mu is not None:
                out.append(f"   {key:22s} mean {mu:10.3f}   median {md:10.3f}")
        if s["ended_by"]:
            out.append("   ended_by               " + ", ".join(f"{k} {v}" for k, v in s["ended_by"].items()))
        if s["chrf_mean"] is not None:
            out.append(f"   chrF mean              {s['chrf_mean']:.2f} ({s['n_reference']} clips with a reference)")
        if s["n_labeled"]:
            out.append(f"   emotion accuracy       {s['emotion_accuracy']:.3f} ({s['emotion_hits']}/{s['n_labeled']}, "
                       f"{s['no_emotion']} name no emotion)   weighted F1 {s['weighted_f1']:.3f}")
            out.append("   per label              " + ", ".join(f"{k} {v:.2f}" for k, v in s["per_label_accuracy"].items()))
        items = result.checklist[name]
        graded = [it for it in items if it["passed"] is not None]
        out.append(f"-- checklist {name}: {sum(bool(it['passed']) for it in graded)} of {len(graded)} checks passed")
        for it in items:
            mark = {True: "PASS", False: "FAIL", None: "info"}[it["passed"]]
            out.append(f"   [{mark}] {it['name']:28s} {it['value']:40s} target: {it['target']}")
    return "\n".join(out)


def bench_report(r: dict) -> str:
    w = r["wall_s"]
    lines = [f"backend={r.get('backend')} k={r['k']} clips={r['clips']} tokens={r['tokens']} "
             f"repeats={r['repeats']} identical_outputs={r['identical_outputs']}",
             "wall time (median, s): " + "  ".join(f"{m}={w[m]:.3f}" for m in METHODS)]
    for key in ("ours_vs_hf_assisted", "tracing_overhead", "alpha", "mean_accepted_length", "c",
                "predicted_speedup", "achieved_speedup", "achieved_speedup_vs_loop",
                "hf_assisted_speedup", "achieved_over_predicted"):
        lines.append(f"{key:26s} {r[key]}")
    return "\n".join(lines)
