"""The measured figures of docs/remote.md, from one run against a running cloud server.

    make cloud &                      # or CLOUD_PORT=... make cloud
    PYTHONPATH=. python scripts/remote_figures.py --url http://127.0.0.1:8000 [--clips 6] [--repeats 3]

1. local vs remote speculative decoding on the sample clips (bench --cloud-url): tokens/s,
   per-call request time and HTTP bytes, identical outputs required;
2. batch scale-out: clips/s of `batch --engine ray --workers N` for N = 1, 2, 4 sharing the one
   server, the N values interleaved over the repeats (one local Ray with max N actors, warmed up
   first: start-up excluded; a pass with N uses the first N actors).
Writes docs/results/remote.json and prints both tables.
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
    ap.add_argument("--clips", type=int, default=6, help="clips for the local/remote comparison")
    ap.add_argument("--batch-clips", type=int, default=12, help="clips per batch pass")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--out", default=str(ROOT / "docs" / "results" / "remote.json"))
    args = ap.parse_args(argv)

    import torch

    from specdec_core.api import with_cloud
    from specdec_core.backends import load_backend
    from specdec_core.decoding.config import DecodeConfig
    from specdec_core.evaluation.batch.manifest import read_manifest
    from specdec_core.evaluation.bench.run import sample_prompts
    from specdec_core.evaluation.batch.ray_engine import RayEdges
    from specdec_core.evaluation.batch.scale import run_batch_dir
    from specdec_core.evaluation.bench.remote import format_report, run_remote_bench

    torch.set_num_threads(1)
    local = load_backend("demo")
    remote = with_cloud(local, args.url)
    res = {"machine": f"{os.cpu_count()} cores, shared with other jobs while measured",
           "url": args.url}
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    res["local_vs_remote"] = run_remote_bench(local, remote, sample_prompts(local, args.clips),
                                              repeats=args.repeats, log=log)
    print(format_report(res["local_vs_remote"]))

    clips = read_manifest(ROOT / "sample_audio" / "manifest.csv")[: args.batch_clips]
    ns = [int(n) for n in args.workers.split(",")]
    spec = {"backend": "demo", "remote": True}
    cfg = DecodeConfig()
    times: dict[int, list[float]] = {n: [] for n in ns}
    failed = 0
    tmp = Path(tempfile.mkdtemp(prefix="remote-figures-"))
    with RayEdges(spec, {"A": cfg.to_dict()}, workers=max(ns)) as edges:   # warmed first
        edges.warm([args.url])
        for rep in range(args.repeats):
            order = ns[rep % len(ns):] + ns[: rep % len(ns)]
            for n in order:          # the first n actors take the rows
                t0 = time.perf_counter()
                r, _ = run_batch_dir(spec, clips, {"A": cfg}, tmp / f"n{n}-{rep}", engine="ray",
                                     workers=n, cloud_urls=[args.url], edges=edges)
                times[n].append(time.perf_counter() - t0)
                failed += r.failed
            log(f"batch repeat {rep + 1}/{args.repeats}: " +
                "  ".join(f"N={n}: {len(clips) / times[n][-1]:.2f} clips/s" for n in ns))
    rows = []
    for n in ns:
        cps = sorted(len(clips) / t for t in times[n])
        rows.append({"workers": n, "clips_per_s_median": round(statistics.median(cps), 3),
                     "min": round(cps[0], 3), "max": round(cps[-1], 3)})
    base = rows[0]["clips_per_s_median"]
    for r in rows:
        r["speedup_vs_1"] = round(r["clips_per_s_median"] / base, 3)
    res["scale_out"] = {"clips": len(clips), "repeats": args.repeats, "failed_rows": failed, "rows": rows}
    print(f"batch --workers N --cloud-url ({len(clips)} clips per pass, {args.repeats} repeats, "
          f"{failed} failed rows)")
    for r in rows:
        print(f"  N={r['workers']}: {r['clips_per_s_median']} clips/s [{r['min']}-{r['max']}]  "
              f"x{r['speedup_vs_1']}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=1), encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
