"""How often the tree sampling checks fire (issue 42): EAGLE's exact sibling rule
(examples/decoders/tree_eagle_sampling.py) and the twin that does not update the residual
between siblings (tree_eagle_sampling_no_residual.py), recorded at T = 0.7 (verify=sampling,
k = 4, 128 new tokens) over N seed sets of 4 heldout2 clips (clip i of set s: seed 1000*s + i).
Prints, per loop, the seed sets and clip runs with each finding code. docs/recorder.md has them.

    PYTHONPATH=. python scripts/tree_sampling_rates.py [--sets 10]
"""
from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CLIPS = sorted(str(p) for p in (ROOT / "sample_audio" / "heldout2").glob("*.wav"))[:4]
KNOBS = {"k": 4, "max_new_tokens": 128, "temperature": 0.7, "verify": "sampling", "prompt_type": "detailed"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", type=int, default=10)
    a = ap.parse_args()
    import torch

    from specdec_core.api import load_backend
    from specdec_core.recorder import load_function, pooled_findings, record_clip

    torch.set_num_threads(1)
    backend = load_backend("demo")
    for name in ("tree_eagle_sampling", "tree_eagle_sampling_no_residual"):
        fn, path = load_function(str(ROOT / "examples" / "decoders" / f"{name}.py"))
        clip, pooled = Counter(), Counter()
        for s in range(a.sets):
            res = [record_clip(fn, path, backend, c, KNOBS, seed=1000 * s + i) for i, c in enumerate(CLIPS)]
            clip.update(f"{f['code']} ({f['severity']})" for r in res for f in {f["code"]: f for f in r["findings"]}.values())
            pf = pooled_findings(res)
            pooled.update(f"{f['code']} ({f['severity']})" for f in pf)
            print(f"  {name} set {s}: pooled {[f['code'] for f in pf]}", flush=True)
        print(f"{name}: per clip (of {4 * a.sets}) {dict(clip)}; pooled (of {a.sets} seed sets) {dict(pooled)}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
