"""Mean accepted length of the head drafter against the edge at the same k (issue 35), greedy, on
the sample clips, heldout2 and unheard: `python scripts/bench_head.py` (docs/benchmarks.md)."""
import glob, statistics, sys
from specdec_core.api import load_backend, run_clip
from specdec_core.decoding.config import DecodeConfig
b = load_backend("demo")
sets = {"sample_audio/*.wav": sorted(glob.glob("sample_audio/*.wav")),
        "heldout2": sorted(glob.glob("sample_audio/heldout2/*.wav")),
        "unheard": sorted(glob.glob("sample_audio/unheard/*.wav"))}
for k in (4,):
  for name, clips in sets.items():
    row = {}
    for label, cfg in (("edge", {}), ("head", {"drafter": "head"}), ("head+stale_features", {"drafter": "head", "faults": ["stale_features"]})):
        rs = [run_clip(b, c, DecodeConfig(k=k, **cfg)) for c in clips]
        row[label] = (statistics.mean(r["metrics"]["mean_accepted_length"] for r in rs),
                      statistics.mean(r["metrics"].get("acceptance_rate", float("nan")) for r in rs))
        ok = all(r["ok"] for r in rs)
    print(k, name, len(clips), {l: (round(a, 2), round(b_, 3)) for l, (a, b_) in row.items()}, flush=True)
