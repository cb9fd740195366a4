"""Overhead of judging a built-in run by recording it (recorder/driver/builtin.py), on the demo pair:
plain decode vs recorded (CLI, batch) vs recorded on private copies (the app). Prints ratios
measured in this one run: python scripts/bench_judged.py [repeats]."""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specdec_core.api import load_backend, prepare  # noqa: E402
from specdec_core.decoding.config import DecodeConfig  # noqa: E402
from specdec_core.decoding.decoder import SpeculativeDecoder  # noqa: E402
from specdec_core.recorder import judged_run  # noqa: E402

demo, cfg = load_backend("demo"), DecodeConfig()
clips = sorted(str(p) for p in Path("sample_audio").glob("*_01.wav"))
prompts = [prepare(demo, c, cfg) for c in clips]
ways = {"plain": lambda p: SpeculativeDecoder(demo, cfg).run(p),
        "recorded": lambda p: judged_run(demo, p, cfg),
        "recorded, private copies": lambda p: judged_run(demo, p, cfg, isolated=True)}
best = {}
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    for name, fn in ways.items():
        t = time.perf_counter()
        for p in prompts:
            fn(p)
        best[name] = min(best.get(name, 1e9), time.perf_counter() - t)
for name, s in best.items():
    print(f"{name:26s} {s / len(prompts) * 1000:7.1f} ms/clip  x{s / best['plain']:.2f} of plain")
