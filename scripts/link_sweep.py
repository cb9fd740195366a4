"""Cloud calls and end-to-end latency against the entropy threshold, under a modelled link.

    PYTHONPATH=. python scripts/link_sweep.py [--rtt-ms 60] [--uplink-kbps 100] [--out docs/results/link_sweep]

Decodes the bundled sample clips with the demo pair (cloud in this process) at each threshold,
with link_rtt_ms / link_uplink_kbps on, and writes <out>.json and <out>.png: per clip, the cloud
calls, the uplink bytes, the latency per token with the modelled link (e2e) and without it
(compute only), the time to first token, and how many clips still say exactly what the
cloud-only decode says. Thresholds run interleaved over `--repeats` passes; times are medians.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

THRESHOLDS = [None, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, math.inf]


def label(t) -> str:
    return "always" if t is None else ("never" if math.isinf(t) else f"{t:g}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rtt-ms", type=float, default=60.0)
    ap.add_argument("--uplink-kbps", type=float, default=100.0)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "docs" / "results" / "link_sweep"))
    ap.add_argument("--replot", action="store_true", help="only redraw <out>.png from <out>.json")
    args = ap.parse_args(argv)
    if args.replot:
        out = Path(args.out)
        plot(json.loads(out.with_suffix(".json").read_text()), out.with_suffix(".png"))
        return 0

    import torch

    from specdec_core.backends import load_backend
    from specdec_core.decoding.baseline import cloud_only
    from specdec_core.decoding.config import DecodeConfig
    from specdec_core.decoding.decoder import SpeculativeDecoder
    from specdec_core.evaluation.bench.run import sample_prompts

    torch.set_num_threads(1)
    backend = load_backend("demo")
    prompts = sample_prompts(backend)
    base = dict(k=args.k, cache_check_every=0, link_rtt_ms=args.rtt_ms,
                link_uplink_kbps=args.uplink_kbps)
    ref = [cloud_only(backend, p, DecodeConfig(**base))["token_ids"] for p in prompts]
    per: dict[str, dict] = {label(t): {"e2e": [], "wall": [], "ttft": []} for t in THRESHOLDS}
    fixed: dict[str, dict] = {}
    for rep in range(args.repeats):
        order = THRESHOLDS[rep % len(THRESHOLDS):] + THRESHOLDS[: rep % len(THRESHOLDS)]
        for t in order:
            cfg = DecodeConfig(entropy_threshold=t, **base)
            ms = [SpeculativeDecoder(backend, cfg, trace=False).run(p) for p in prompts]
            tok = sum(tr.metrics["new_tokens"] for tr in ms)
            per[label(t)]["e2e"].append(1000 * sum(tr.metrics["e2e_s"] for tr in ms) / tok)
            per[label(t)]["wall"].append(1000 * sum(tr.metrics["wall_s"] for tr in ms) / tok)
            per[label(t)]["ttft"].append(1000 * statistics.mean(tr.metrics["ttft_s"] for tr in ms))
            fixed[label(t)] = {
                "cloud_calls_per_clip": round(statistics.mean(tr.metrics["uplink_calls"] for tr in ms), 3),
                "bytes_up_per_clip": round(statistics.mean(tr.metrics["bytes_up"] for tr in ms), 1),
                "tokens_per_clip": round(tok / len(ms), 2),
                "same_as_cloud_only": sum(tr.token_ids == r for tr, r in zip(ms, ref)),
            }
        print(f"repeat {rep + 1}/{args.repeats} done", file=sys.stderr)
    rows = []
    for t in THRESHOLDS:
        key = label(t)
        v = per[key]
        rows.append({"threshold": key, **fixed[key],
                     "e2e_ms_per_token": round(statistics.median(v["e2e"]), 2),
                     "compute_ms_per_token": round(statistics.median(v["wall"]), 3),
                     "ttft_ms": round(statistics.median(v["ttft"]), 2)})
    res = {"link_rtt_ms": args.rtt_ms, "link_uplink_kbps": args.uplink_kbps, "k": args.k,
           "clips": len(prompts), "repeats": args.repeats, "rows": rows}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(res, indent=1), encoding="utf-8")
    plot(res, out.with_suffix(".png"))
    print(f"{'threshold':>9} {'calls/clip':>10} {'bytes up':>9} {'e2e ms/tok':>10} "
          f"{'compute':>8} {'ttft ms':>8} {'=cloud':>6}")
    for r in rows:
        print(f"{r['threshold']:>9} {r['cloud_calls_per_clip']:>10} {r['bytes_up_per_clip']:>9} "
              f"{r['e2e_ms_per_token']:>10} {r['compute_ms_per_token']:>8} {r['ttft_ms']:>8} "
              f"{r['same_as_cloud_only']:>3}/{len(prompts)}")
    print(f"wrote {out.with_suffix('.json')} and {out.with_suffix('.png')}")
    return 0


def plot(res: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = res["rows"]
    xs = list(range(len(rows)))
    fig, ax = plt.subplots(figsize=(7.2, 4.0), dpi=120)
    ax.bar(xs, [r["cloud_calls_per_clip"] for r in rows], color="#9ecae1", label="cloud calls per clip")
    ax.set_xticks(xs, [r["threshold"] for r in rows])
    ax.set_xlabel("entropy threshold (nats): the cloud is called when a block's max entropy exceeds it")
    ax.set_ylabel("cloud calls per clip")
    ax2 = ax.twinx()
    ax2.plot(xs, [r["e2e_ms_per_token"] for r in rows], "o-", color="#d62728",
             label=f"latency per token, compute + link ({res['link_rtt_ms']:g} ms RTT, "
                   f"{res['link_uplink_kbps']:g} kbit/s)")
    ax2.plot(xs, [round(r["e2e_ms_per_token"] - r["compute_ms_per_token"], 2) for r in rows], "^-",
             color="#ff7f0e", label="of which the modelled link")
    ax2.plot(xs, [r["compute_ms_per_token"] for r in rows], "s--", color="#555555",
             label="compute only (measured on a loaded shared machine: noisy)")
    ax2.set_ylabel("ms per token")
    ax2.set_ylim(bottom=0)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=6.5, loc="upper right")
    ax.set_title(f"demo pair, {res['clips']} clips, k={res['k']}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)


if __name__ == "__main__":
    raise SystemExit(main())
