"""How often the pooled temperature check fires (issue 36): correct sampling loops (false
alarms, 4 clips) and double_temperature (found, 24 clips), over N seed sets, every clip its own
seed (clip i of set s: seed 1000*s + i, as `record --seed` gives). Prints one line per loop:
`loop T: flagged F/N seed sets`. docs/recorder.md has the numbers.

    python scripts/pooled_temperature_rate.py [--sets 20]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# (loop, declared T, clips): the correct loops on 4 clips, double_temperature on 24
LOOPS = [("sampling_correct", 0.7, 4), ("sampling_vllm_rejection", 1.0, 4),
         ("double_temperature", 0.7, 24)]
CLIPS = sorted(str(p) for p in (ROOT / "sample_audio" / "heldout2").glob("*.wav"))


def flagged(backend, name: str, T: float, seed_set: int, clips: list[str]) -> bool:
    from specdec_core.recorder import load_function, pooled_findings, record_clip

    fn, path = load_function(f"{ROOT / 'examples' / 'decoders' / name}.py:decode")
    knobs = {"k": 4, "max_new_tokens": 128, "temperature": T, "verify": "sampling",
             "prompt_type": "detailed"}
    res = [record_clip(fn, path, backend, c, knobs, seed=1000 * seed_set + i)
           for i, c in enumerate(clips)]
    assert all(r["ok"] for r in res), [r.get("error") for r in res if not r["ok"]]
    return any(f["code"] == "hidden_draft_processing" for f in pooled_findings(res))


def rates(sets: int, loops=LOOPS) -> dict:
    from specdec_core.api import load_backend

    backend = load_backend("demo")
    return {(name, T, n): sum(flagged(backend, name, T, s, CLIPS[:n]) for s in range(sets))
            for name, T, n in loops}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", type=int, default=20)
    a = ap.parse_args()
    for (name, T, clips), n in rates(a.sets).items():
        print(f"{name} T={T:g}: flagged {n}/{a.sets} seed sets ({clips} heldout2 clips each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
