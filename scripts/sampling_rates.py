"""How often the recorder's sampling checks fire on the example sampling loops, over seeds.

PYTHONPATH=. python scripts/sampling_rates.py LOOP[,LOOP...] FIRST:LAST [--clips 12] [--k 8]
[--temperature 1.0]. Each clip gets its own seed (1000 * seed + clip index); per seed it
prints the pooled and per-clip sampling findings, at the end the tally (docs/recorder.md).
"""
import argparse
import time
from pathlib import Path

import torch

from specdec_core.api import load_backend, prepare
from specdec_core.decoding.config import DecodeConfig
from specdec_core.recorder import analyze
from specdec_core.recorder import load_function
from specdec_core.recorder import Recorder
from specdec_core.recorder import evidence
from specdec_core.recorder.analyze import evidence_of
from specdec_core.recorder.checks.sampling.rule import pooled as pooled_sampling

SAMPLING = {"acceptance_rule", "greedy_draft_sampling", "residual_mismatch"}
ROOT = Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("loops")
    ap.add_argument("seeds")
    ap.add_argument("--clips", type=int, default=12)
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--temperature", type=float, default=1.0)
    a = ap.parse_args()
    torch.set_num_threads(1)
    demo = load_backend("demo")
    clips = sorted((ROOT / "sample_audio").glob("*.wav"))[:a.clips]
    prompts = [prepare(demo, str(c), DecodeConfig(prompt_type="detailed")) for c in clips]
    first, last = map(int, a.seeds.split(":"))
    for name in a.loops.split(","):
        fn, _ = load_function(f"{ROOT / 'examples' / 'decoders' / name}.py:decode")
        tally, t0 = {}, time.time()
        for s in range(first, last):
            recs, per = [], set()
            for i, p in enumerate(prompts):
                rec = Recorder(demo.edge, demo.cloud, demo.tokenizer, p.input_ids, demo.stop_ids,
                               k=a.k, temperature=a.temperature, verify="sampling",
                               max_new_tokens=128)
                with rec:
                    out = fn(demo.edge, demo.cloud, demo.tokenizer, p.input_ids, k=a.k,
                             stop_ids=demo.stop_ids, temperature=a.temperature, seed=1000 * s + i)
                r = rec.finish(out)
                recs.append(r)
                per |= {f["code"] for f in analyze(r, demo.tokenizer, p.info)[1]} & SAMPLING
            pooled = {f["code"] for f in pooled_sampling(evidence.distinct([evidence_of(r) for r in recs]))} & SAMPLING
            key = ",".join(sorted(pooled | per)) or "quiet"
            tally[key] = tally.get(key, 0) + 1
            print(name, s, "pooled", sorted(pooled), "per clip", sorted(per), flush=True)
        print("RATE", name, f"k={a.k} T={a.temperature} clips={len(prompts)} "
              f"seeds={last - first}", tally, f"{time.time() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    main()
