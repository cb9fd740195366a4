"""The measured clips/s of docs/scale.md: `batch --engine ray` with 1 and 2 edge workers, the
cloud local (in each worker) or behind one `make cloud` server.

    make cloud &                      # or CLOUD_PORT=... make cloud
    PYTHONPATH=. python scripts/scale_figures.py --url http://127.0.0.1:8000 [--clips 12] [--repeats 3]

One local Ray with 2 actors, warmed up first (Ray and model start-up excluded); each repeat runs
the four variants (cloud local/server x 1/2 workers) in a rotating order, so load from other
jobs on the machine falls on all of them. Every pass must give the same token ids as the first
(greedy). Writes docs/results/scale.json and prints the table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--clips", type=int, default=12, help="clips per pass")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "docs" / "results" / "scale.json"))
    args = ap.parse_args(argv)

    from specdec_core.decoding.config import DecodeConfig
    from specdec_core.evaluation.batch.manifest import read_manifest
    from specdec_core.evaluation.batch.ray_engine import RayEdges
    from specdec_core.evaluation.batch.scale import run_batch_dir

    clips = read_manifest(ROOT / "sample_audio" / "manifest.csv")[: args.clips]
    cfg = DecodeConfig()
    variants = [(cloud, n) for cloud in ("local", "server") for n in (1, 2)]
    times: dict[tuple, list[float]] = {v: [] for v in variants}
    ids, failed, tmp = None, 0, Path(tempfile.mkdtemp(prefix="scale-figures-"))
    spec = {"backend": "demo"}
    with RayEdges(spec, {"A": cfg.to_dict()}, workers=2) as edges:
        edges.warm([args.url])
        for rep in range(args.repeats):
            order = variants[rep % 4:] + variants[: rep % 4]
            for cloud, n in order:
                urls = [args.url] if cloud == "server" else []
                t0 = time.perf_counter()
                res, _ = run_batch_dir(spec, clips, {"A": cfg}, tmp / f"{cloud}-{n}-{rep}",
                                       engine="ray", workers=n, cloud_urls=urls, edges=edges)
                times[cloud, n].append(time.perf_counter() - t0)
                failed += res.failed
                got = [r.get("token_ids") for r in res.rows]
                ids = ids or got
                if got != ids:
                    print(f"token ids differ: cloud {cloud}, {n} workers", file=sys.stderr)
                    return 1
            print(f"repeat {rep + 1}/{args.repeats}: " + "  ".join(
                f"{c}/N={n}: {len(clips) / times[c, n][-1]:.2f}" for c, n in variants), file=sys.stderr)
    rows = []
    for cloud, n in variants:
        cps = sorted(len(clips) / t for t in times[cloud, n])
        rows.append({"cloud": cloud, "workers": n, "clips_per_s_median": round(statistics.median(cps), 3),
                     "min": round(cps[0], 3), "max": round(cps[-1], 3)})
    # N=2 over N=1 within each repeat (same cloud, minutes apart at most): the ratio to quote
    ratios = {c: sorted(times[c, 1][i] / times[c, 2][i] for i in range(args.repeats))
              for c in ("local", "server")}
    res = {"machine": f"{os.cpu_count()} cores, shared with other jobs while measured",
           "url": args.url, "clips": len(clips), "repeats": args.repeats, "failed_rows": failed,
           "identical_token_ids": True, "rows": rows,
           "n2_over_n1_per_repeat": {c: [round(x, 3) for x in v] for c, v in ratios.items()}}
    print(f"batch --engine ray, {len(clips)} clips per pass, {args.repeats} repeats, {failed} failed rows")
    for r in rows:
        print(f"  cloud {r['cloud']:6s} N={r['workers']}: {r['clips_per_s_median']} clips/s "
              f"[{r['min']}-{r['max']}]")
    for c, v in ratios.items():
        print(f"  cloud {c:6s} N=2 / N=1 per repeat: median {statistics.median(v):.2f} "
              f"[{v[0]:.2f}-{v[-1]:.2f}]")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1), encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
