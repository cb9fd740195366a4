"""Recording overhead: the correct example decoder on the demo pair, with and without the
Recorder (and with the analysis), interleaved over repeats. Prints ratios recorded/unrecorded.

    PYTHONPATH=. python scripts/bench_recorder.py [--repeats 5] [--clips 6]
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from specdec_core.api import load_backend
from specdec_core.audio.loading import load_audio
from specdec_core.recorder import Recorder, analyze
from specdec_core.recorder.driver.cli import load_function

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--clips", type=int, default=6)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
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


if __name__ == "__main__":
    main()
