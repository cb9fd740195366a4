"""Plain-text reports the CLI prints (batch summary + checklist, benchmark ratios)."""
from __future__ import annotations

from specdec_core.evaluation.batch.run import KEY_METRICS, BatchResult
from specdec_core.evaluation.bench.run import METHODS


FAIL_ON = {"error": ("error",), "warning": ("error", "warning")}
EXIT_CODES = ("exit codes: 0 every clip ran (and, with --fail-on, no finding of that severity or "
              "worse); 1 a clip failed (ok: false) or --fail-on found one; 2 usage error (bad "
              "option, knob, backend, file or decoder signature). docs/cli.md")


def fail_on_line(level: str | None, findings_by_clip) -> str:
    """--fail-on error|warning: one line naming the root findings of that severity or worse
    (clip: code (explains ...)), counted as the summary line counts them, or '' when there is
    none (or no --fail-on). Nested symptoms count too (named after their root)."""
    if not level:
        return ""
    hits, roots, nested = {}, {s: 0 for s in FAIL_ON[level]}, 0
    for clip, found in findings_by_clip:
        at = [f for f in found if f.get("severity") in FAIL_ON[level]]
        top = [f for f in at if not f.get("explained_by")]
        for f in top:
            roots[f["severity"]] += 1
        nested += len(at) - len(top)
        if top:
            hits.setdefault(clip or "prompt", []).extend(folded_codes(f, found) for f in top)
    if not hits:
        return ""
    counted = ", ".join(f"{n} {s}{'s' if n > 1 else ''}" for s, n in roots.items() if n) or "no root"
    also = f" (+{nested} nested symptom{'s' if nested > 1 else ''})" if nested else ""
    return (f"--fail-on {level}: {counted}{also}: "
            + "; ".join(f"{clip}: {', '.join(dict.fromkeys(v))}" for clip, v in hits.items()))


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
        from specdec_core.evaluation.batch.checklist import checklist_head

        out.append(f"-- checklist {name}: {checklist_head(items)}")
        for it in items:
            mark = {True: "PASS", False: "FAIL", None: "info"}[it["passed"]]
            out.append(f"   [{mark}] {it['name']:28s} {it['value']:40s} target: {it['target']}")
    if result.by_label:
        from specdec_core.evaluation.batch.watch import label_report
        out.append(label_report(result.by_label))
    return "\n".join(out)


def _rng(r: dict, key: str, fmt: str = ".3f") -> str:
    lo, hi = r[key + "_range"]
    return f"{r[key]:{fmt}} ({lo:{fmt}}–{hi:{fmt}})"


def _num(v, none: str, fmt: str) -> str:
    return none if v is None else v if isinstance(v, str) else f"{v:{fmt}}"


SPEEDUPS = f"{'predicted':>9s} {'measured':>8s} {'vs cloud loop':>21s} {'vs cloud-only (HF)':>21s}"


def _speedups(x: dict, clips: int) -> str:
    """A sweep point's SPEEDUPS columns and its identical clips."""
    return (f"{x['predicted']:9.3f} {_num(x.get('cost_model'), '', '8.3f'):>8s} {_rng(x, 'achieved_vs_loop'):>21s} "
            f"{_rng(x, 'achieved_vs_cloud_only'):>21s} {x['identical_clips']:>4d}/{clips}")


def bench_report(r: dict) -> str:
    """Wall times, ratios (median and min–max over repeats) and the sweep tables."""
    w, wr = r["wall_s"], r["wall_s_range"]
    lines = [f"backend={r.get('backend')} k={r['k']} clips={r['clips']} tokens={r['tokens']} "
             f"repeats={r['repeats']} identical_outputs={r['identical_outputs']}",
             "wall time, s, median (range) over repeats:",
             *(f"  {m:14s} {w[m]:.3f} ({wr[m][0]:.3f}–{wr[m][1]:.3f})" for m in METHODS)]
    for key in ("ours_vs_hf_assisted", "tracing_overhead", "achieved_speedup", "achieved_speedup_vs_loop",
                "untraced_speedup", "untraced_speedup_vs_loop", "hf_assisted_speedup"):
        lines.append(f"{key:26s} {_rng(r, key)}")
    for key in ("alpha", "alpha_leviathan", "mean_accepted_length", "cloud_calls_per_token", "c", "predicted_speedup",
                "leviathan_predicted", "predicted_from_forwards", "achieved_over_predicted",
                "achieved_over_leviathan"):
        lines.append(f"{key:26s} {r[key]}")
    if r.get("k_sweep"):
        lines.append(f"k sweep (classic greedy; alpha = accepted/drafted, alpha_L = per judged draft, "
                     f"leviathan = formula with alpha_L, predicted = cost model from counted forwards, "
                     f"measured = measured cost model (forward cost by width + overhead); "
                     f"speedups over the cloud alone, median (range) of {r['sweep_repeats']} repeats):")
        lines.append(f"  {'k':>3s} {'alpha':>6s} {'alpha_L':>7s} {'leviathan':>9s} {SPEEDUPS} {'identical':>9s}")
        for x in r["k_sweep"]:
            lines.append(f"  {x['k']:>3d} {x['alpha']:6.3f} {x['alpha_leviathan']:7.3f} {x['leviathan']:9.3f} "
                         f"{_speedups(x, r['clips'])}")
    if r.get("threshold_sweep"):
        lines.append(f"threshold sweep at k={r['k']} (entropy in nats, frac = of ln|V| = {r.get('ln_vocab')}; "
                     f"{r.get('thresholds_from')}); lossy: identical = clips token-identical to the "
                     f"cloud's greedy output, prefix = share of it reproduced before the first difference:")
        lines.append(f"  {'threshold':>9s} {'frac':>6s} {'calls/tok':>9s} {'alpha':>6s} {'alpha_L':>7s} "
                     f"{'edge-only':>9s} {SPEEDUPS} {'identical':>9s} {'prefix':>6s}")
        for x in r["threshold_sweep"]:
            t, f = _num(x["threshold"], "null", "g"), _num(x["threshold_frac"], "", ".3f")
            lines.append(f"  {t:>9s} {f:>6s} {x['cloud_calls_per_token']:9.3f} {x['alpha']:6.3f} "
                         f"{x['alpha_leviathan']:7.3f} {x['edge_only_share']:9.3f} "
                         f"{_speedups(x, r['clips'])} {x['prefix_agreement']:6.3f}")
    if r.get("advice"):
        a = r["advice"]
        lines.append("advice (measured cost model; k: classic greedy, lossless; thresholds at the advised k, "
                     "quality cost = 1 − prefix agreement with the cloud's greedy output):")
        lines.append("  " + "  ".join(f"k={x['k']}: {x['predicted']:.3f}" for x in a["by_k"]))
        for x in a["thresholds"]:
            t = "null" if x["threshold"] is None else _num(x["threshold"], "", "g")
            lines.append(f"  threshold {t:>6s}: predicted {x['predicted']:.3f}, quality cost "
                         f"{x['quality_cost']:.3f}, identical {x['identical_clips']}/{r['clips']}")
    return "\n".join(lines)


def classic_sweep_mismatches(r: dict) -> list[str]:
    """Classic (lossless) sweep points whose output is not the cloud's greedy output."""
    bad = [f"k={x['k']}" for x in r.get("k_sweep", []) if x["identical_clips"] != r["clips"]]
    bad += ["threshold=null" for x in r.get("threshold_sweep", [])
            if x["threshold"] is None and x["identical_clips"] != r["clips"]]
    return bad


def bench_summary(r: dict) -> str:
    """The last lines `bench` prints: the headline speedups with their ranges, and the model."""
    same = "yes" if r["identical_outputs"] else "NO"
    lines = [f"greedy SD vs cloud-only (HF generate): {r['achieved_speedup']:.2f}× (range "
             f"{_pair(r['achieved_speedup_range'])} over {r['repeats']} repeats), vs minimal cloud loop: "
             f"{r['achieved_speedup_vs_loop']:.2f}× (range {_pair(r['achieved_speedup_vs_loop_range'])}), "
             f"identical outputs: {same} ({r['identical_clips']}/{r['clips']} clips)",
             f"k = {r['k']}, c = {r['c']:.3f} (edge forward / cloud forward), alpha = {r['alpha_leviathan']:.3f} "
             f"per judged draft ({r['alpha']:.3f} accepted/drafted): measured cost model "
             f"{r['predicted_speedup']:.2f}×, achieved (vs cloud loop) / predicted {r['achieved_over_predicted']:.2f} "
             f"(range {_pair(r.get('achieved_over_predicted_range'))}); Leviathan prediction "
             f"{r['leviathan_predicted']:.2f}×, achieved / Leviathan {r['achieved_over_leviathan']:.2f}; "
             f"cost model from counted forwards {r['predicted_from_forwards']:.2f}×"]
    if r.get("advice"):
        lines.append(advice_line(r["advice"], r.get("advice_check")))
    bad = classic_sweep_mismatches(r)
    if bad:
        lines.append("classic sweep points whose output differs from the cloud's greedy output: " + ", ".join(bad))
    return "\n".join(lines)


def _pair(x) -> str:
    return f"{x[0]:.2f}–{x[1]:.2f}" if x else "n/a"


def advice_line(a: dict, check: dict | None) -> str:
    """`advice: k = …` — the advised k and threshold with their predictions and the rerun."""
    def rerun(job):
        c = (check or {}).get(job)
        if not c:
            return ""
        ok = "yes" if c["within_tolerance"] else "NO"
        return (f"; rerun {c['achieved_vs_loop']:.2f}× vs cloud loop, achieved/predicted "
                f"{c['achieved_over_predicted']:.2f} (range {_pair(c['achieved_over_predicted_range'])}), "
                f"within {check['tolerance']:.0%}: {ok}")
    line = (f"advice: k = {a['k']} (greedy, same output at every k; predicted {a['predicted']:.2f}× over "
            f"the cloud loop{rerun('advised_k')})")
    if a.get("threshold") is None:
        b = a.get("best_within_budget")
        best = "" if not b else (f"; best: {_num(b['threshold'], 'None', 'g')} nats, {b['predicted']:.2f}×, "
                                 f"{b['gain_over_classic']:+.1%}, quality cost {b['quality_cost']:.3f}")
        line += (f"; entropy threshold: none (none with quality cost ≤ {a['quality_budget']:.2f} is "
                 f"predicted ≥ {a.get('min_gain', 0):.0%} faster than classic at k = {a['k']}{best})")
    else:
        line += (f"; entropy threshold {_num(a['threshold'], 'None', 'g')} nats at k = {a['k']}: "
                 f"predicted {a['threshold_predicted']:.2f}× "
                 f"at quality cost {a['threshold_quality_cost']:.3f} ≤ {a['quality_budget']:.2f}"
                 f"{rerun('advised_threshold')}")
    return line


def check_report(report: dict) -> str:
    """The pair check as plain text: one line per finding (errors first), then what passed."""
    out = [f"pair check: edge {report['edge']}", f"            cloud {report['cloud']}"]
    for f in report["checks"]:
        out.append(f"{f['severity']:8s} {f['code']}: {f['title']}: {f['detail']}")
        if f["severity"] != "info":
            out.append(f"         fix: {f['fix']}")
    if report["passed"]:
        from specdec_core.pairs.checks import passed_words

        out.append("ok       " + passed_words(report["passed"]))
    v = report["versions"]
    out.append(f"versions python {v['python']}, torch {v['torch']}, transformers {v['transformers']}, "
               f"gradio {v['gradio']}; device {report['device']}")
    out.append("usable" if report["usable"] else "NOT usable: fix the errors above")
    return "\n".join(out)


def folded_codes(root: dict, findings: list[dict]) -> str:
    """'stale_cache (explains context_mismatch, unverified_end)'."""
    under = [f["code"] for f in findings if f.get("explained_by") == root["code"]]
    return root["code"] + (f" (explains {', '.join(under)})" if under else "")


def finding_lines(findings: list[dict]) -> list[str]:
    """Root findings, each followed by the symptoms it explains (indented): the run report."""
    from specdec_core.findings import from_json

    fs = [from_json(f) for f in findings]
    out = []
    for r in (f for f in fs if not f["explained_by"]):
        out.append(f"{r['severity']}: {r['code']}: {r['title']}")
        out += [f"  └ explained by {r['code']}: {f['code']}: {f['title']}" for f in fs
                if f["explained_by"] == r["code"]]
    return out


def by_severity(findings: list[dict]) -> str:
    """'1 error: stale_cache (explains context_mismatch, unverified_end) · info: vocab_widths':
    the root findings, each with the symptoms folded under it (codes once each): `record`."""
    parts, roots = [], [f for f in findings if not f.get("explained_by")]
    for sev in ("error", "warning", "info"):
        codes = list(dict.fromkeys(folded_codes(f, findings) for f in roots if f["severity"] == sev))
        if codes:
            label = "info" if sev == "info" else f"{len(codes)} {sev}{'s' if len(codes) > 1 else ''}"
            parts.append(f"{label}: {', '.join(codes)}")
    if not any(f["severity"] == "error" for f in roots):
        parts.insert(0, "no error finding")
    return " · ".join(parts)


def numerics_lines(numerics: dict | None, label: str, reference: dict | None) -> list[str]:
    """The numerics probe ('ties closer than X logits can flip') and where the output leaves the
    reference, numerics or decoder (analysis/divergence.py): `run --baseline` (label cloud-only)
    and `record --reference` (label reference)."""
    from specdec_core.analysis.divergence import summary
    from specdec_core.decoding.numerics import probe_line

    out = [x for x in [probe_line(numerics)] if x]
    if reference:
        out.append(f"{label}: " + summary(reference.get("first_divergence")))
    return out
