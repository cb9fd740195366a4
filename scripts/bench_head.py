"""Mean accepted length of the head drafter against the edge at the same k (issue 35), greedy, on
the sample clips, heldout2 and unheard: `python scripts/bench_head.py [k]` (docs/benchmarks.md)."""
import glob
import statistics
import sys

from specdec_core.api import load_backend, run_clip
from specdec_core.decoding.config import DecodeConfig

SETS = {"sample_audio/*.wav": "sample_audio/*.wav", "heldout2": "sample_audio/heldout2/*.wav",
        "unheard": "sample_audio/unheard/*.wav"}
DRAFTERS = {"edge": {}, "head": {"drafter": "head"},
            "head+stale_features": {"drafter": "head", "faults": ["stale_features"]}}


def main(k: int = 4) -> None:
    backend = load_backend("demo")
    for name, pattern in SETS.items():
        clips = sorted(glob.glob(pattern))
        row = {}
        for label, knobs in DRAFTERS.items():
            runs = [run_clip(backend, c, DecodeConfig(k=k, **knobs)) for c in clips]
            row[label] = (round(statistics.mean(r["metrics"]["mean_accepted_length"] for r in runs), 2),
                          round(statistics.mean(r["metrics"]["acceptance_rate"] for r in runs), 3))
        print(k, name, len(clips), row, flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
