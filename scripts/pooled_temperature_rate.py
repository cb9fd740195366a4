"""How often the pooled temperature check fires (issue 36): correct sampling loops (false
alarms) and double_temperature (found), over N seed sets of C clips each, every clip its own
seed (clip i of set s: seed 1000*s + i, as `record --seed` gives). Prints one line per loop:
`loop T: flagged F/N seed sets`. docs/recorder.md has the numbers.

    python scripts/pooled_temperature_rate.py [--sets 20] [--clips 4]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LOOPS = [("sampling_correct", 0.7, False), ("wild/vllm_rejection", 1.0, False),
         ("double_temperature", 0.7, True)]
CLIPS = sorted(str(p) for p in (ROOT / "sample_audio" / "heldout2").glob("*.wav"))


def flagged(backend, name: str, T: float, seed_set: int, clips: list[str]) -> bool:
    from specdec_core.recorder.cli import load_function, pooled_findings, record_clip

    fn, path = load_function(f"{ROOT / 'examples' / 'decoders' / name}.py:decode")
    knobs = {"k": 4, "max_new_tokens": 128, "temperature": T, "verify": "sampling",
             "prompt_type": "detailed"}
    res = [record_clip(fn, path, backend, c, knobs, seed=1000 * seed_set + i)
           for i, c in enumerate(clips)]
    return any(f["code"] == "hidden_draft_processing" for f in pooled_findings(res))


def rates(sets: int, n_clips: int, loops=LOOPS) -> dict:
    from specdec_core.api import load_backend

    backend = load_backend("demo")
    clips = CLIPS[:n_clips]
    return {(name, T): sum(flagged(backend, name, T, s, clips) for s in range(sets))
            for name, T, _ in loops}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", type=int, default=20)
    ap.add_argument("--clips", type=int, default=4)
    a = ap.parse_args()
    for (name, T), n in rates(a.sets, a.clips).items():
        print(f"{name} T={T:g}: flagged {n}/{a.sets} seed sets ({a.clips} clips each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
