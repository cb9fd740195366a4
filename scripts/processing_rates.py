"""How often the issue-42 checks fire on the example loops, over seed sets (docs/recorder.md,
"Declared processing and the exact rules").

PYTHONPATH=. python scripts/processing_rates.py LOOP[,LOOP...] FIRST:LAST [--clips 4] [--k 8]
[--temperature 0.7] [--tokens 64] [--set draft_top_p=0.8 ...]. Seed set s gives clip i the
seed 1000 * s + i (as `record --seed`); per seed set it prints the pooled findings of errors
and warnings (and `sampling_rule` / `not_judged`), at the end the tally.
"""
import argparse
import time
from pathlib import Path

import torch

from specdec_core.api import load_backend
from specdec_core.recorder import load_function, parse_sets, pooled_findings, record_clip

ROOT = Path(__file__).resolve().parents[1]
SHOWN = {"sampling_rule", "not_judged"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("loops")
    ap.add_argument("seeds")
    ap.add_argument("--clips", type=int, default=4)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--set", dest="sets", action="append", default=[])
    a = ap.parse_args()
    torch.set_num_threads(1)
    demo = load_backend("demo")
    clips = [str(c) for c in sorted((ROOT / "sample_audio").glob("*.wav"))[:a.clips]]
    verify = "sampling" if a.temperature > 0 else "greedy"
    knobs = parse_sets([f"k={a.k}", f"max_new_tokens={a.tokens}", f"temperature={a.temperature}",
                        f"verify={verify}", *a.sets])
    first, last = map(int, a.seeds.split(":"))
    for name in a.loops.split(","):
        fn, path = load_function(f"{ROOT / 'examples' / 'decoders' / name}.py:decode")
        tally, t0 = {}, time.time()
        for s in range(first, last):
            res = [record_clip(fn, path, demo, c, knobs, seed=1000 * s + i) for i, c in enumerate(clips)]
            got = sorted({f["code"] for f in pooled_findings(res)
                          if f["severity"] != "info" or f["code"] in SHOWN})
            print(f"{name} seed set {s}: {got or 'nothing'}", flush=True)
            for c in got or ["nothing"]:
                tally[c] = tally.get(c, 0) + 1
        print(f"{name}: {last - first} seed sets, {tally} ({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
