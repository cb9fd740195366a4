"""Recording overhead: the correct example decoder on the demo pair, with and without the
Recorder (and with the analysis), interleaved over repeats. Prints ratios recorded/unrecorded.

    PYTHONPATH=. python scripts/bench_recorder.py [--repeats 5] [--clips 6]

`--analysis-vs REV` (issue 47; REV a commit or a source tree) instead times `analyze` alone on sampled recordings (the
built-in decoder at T=0.7, which resumes at its own corrections, and sampling_correct.py at
T=1), made once with this code and saved, in this tree and in `git archive REV` (each in its own
process, interleaved), and prints the medians and this tree's tape / round builds per analysis.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from specdec_core.api import load_backend
from specdec_core.audio.loading import load_audio
from specdec_core.recorder import Recorder, analyze
from specdec_core.recorder import load_function

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--clips", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--analysis-vs", metavar="REV", help="time analyze here and at git REV")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if a.analysis_vs:
        return analysis_vs(a.analysis_vs, a.repeats, a.clips)
    b = load_backend("demo")
    fn, _ = load_function(f"{ROOT / 'examples/decoders/correct.py'}:decode")
    clips = sorted((ROOT / "sample_audio").glob("*_01.wav"))[: a.clips]
    prompts = [b.build_inputs(load_audio(str(c)), "detailed").input_ids for c in clips]
    stops = tuple(b.stop_ids)

    def plain():
        for ids in prompts:
            fn(b.edge, b.cloud, b.tokenizer, ids, k=4, max_new_tokens=128, stop_ids=stops)

    def recorded(with_analysis=False):
        for ids in prompts:
            with Recorder(b.edge, b.cloud, b.tokenizer, ids, stops, k=4, max_new_tokens=128) as rec:
                out = fn(b.edge, b.cloud, b.tokenizer, ids, k=4, max_new_tokens=128, stop_ids=stops)
            r = rec.finish(out)
            if with_analysis:
                analyze(r, b.tokenizer)

    times = {"plain": [], "recorded": [], "recorded+analysis": []}
    plain()
    recorded(True)                                  # warm-up
    for _ in range(a.repeats):                      # interleaved
        for name, f in (("plain", plain), ("recorded", recorded),
                        ("recorded+analysis", lambda: recorded(True))):
            t0 = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t0)
    base = times["plain"]
    print(f"{len(clips)} clips x {a.repeats} interleaved repeats, torch threads {a.threads}")
    for name, ts in times.items():
        ratios = [t / p for t, p in zip(ts, base)]
        print(f"{name:18s} median {statistics.median(ts):.3f} s  ratio to plain: median "
              f"{statistics.median(ratios):.2f} (range {min(ratios):.2f}-{max(ratios):.2f})")


TIMER = """import json, sys, time
from specdec_core.api import load_backend
from specdec_core.recorder import analyze
recs, tok = json.load(open(sys.argv[1])), load_backend("demo").tokenizer
for r in recs:
    analyze(r, tok)                                   # warm-up
ts = []
for _ in range(int(sys.argv[2])):
    t0 = time.perf_counter()
    for r in recs:
        analyze(r, tok)
    ts.append(time.perf_counter() - t0)
print(json.dumps(ts))
"""


def sampled_recordings(clips: int) -> list[dict]:
    from specdec_core.api import prepare
    from specdec_core.decoding.config import DecodeConfig
    from specdec_core.recorder import record_builtin

    b = load_backend("demo")
    files = sorted((ROOT / "sample_audio").glob("*_01.wav"))[:clips]
    cfg = DecodeConfig(temperature=0.7)
    recs = [record_builtin(b, prepare(b, str(c), cfg), cfg)[0] for c in files]
    fn, _ = load_function(f"{ROOT / 'examples/decoders/sampling_correct.py'}:decode")
    for i, c in enumerate(files):
        ids = prepare(b, str(c), DecodeConfig()).input_ids
        with Recorder(b.edge, b.cloud, b.tokenizer, ids, b.stop_ids, k=4, temperature=1.0,
                      verify="sampling", max_new_tokens=128) as rec:
            out = fn(b.edge, b.cloud, b.tokenizer, ids, k=4, stop_ids=b.stop_ids,
                     temperature=1.0, seed=i)
        recs.append(rec.finish(out))
    return recs


def analysis_vs(rev: str, repeats: int, clips: int) -> None:
    from specdec_core.recorder.evidence.tape import BUILDS

    recs = sampled_recordings(clips)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "recs.json"
        path.write_text(json.dumps(recs))
        old = Path(rev) if Path(rev).is_dir() else Path(tmp) / "old"    # REV: a commit or a tree
        if not old.is_dir():
            old.mkdir()
            tar = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(old)], input=tar, check=True)
        times = {rev: [], "this tree": []}
        for _ in range(repeats):                    # interleaved, one repeat each per turn
            for name, root in ((rev, old), ("this tree", ROOT)):
                out = subprocess.run([sys.executable, "-c", TIMER, str(path), "1"], cwd=root,
                                     env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
                                     capture_output=True, text=True, check=True).stdout
                times[name] += json.loads(out.strip().splitlines()[-1])
    BUILDS.clear()
    tok = load_backend("demo").tokenizer
    for r in recs:
        analyze(r, tok)
    print(f"analyze on {len(recs)} sampled recordings ({clips} built-in at T=0.7, {clips} "
          f"sampling_correct.py at T=1), {repeats} interleaved repeats")
    for name, ts in times.items():
        print(f"{name:10s} median {statistics.median(ts):.3f} s (range {min(ts):.3f}-{max(ts):.3f})")
    print(f"speed-up {statistics.median(times[rev]) / statistics.median(times['this tree']):.2f}x; "
          f"this tree per analysis: {BUILDS['tapes'] / len(recs):.2f} tape builds, "
          f"{BUILDS['rounds'] / len(recs):.2f} round builds, {BUILDS['replays'] / len(recs):.2f} replays")


if __name__ == "__main__":
    main()
