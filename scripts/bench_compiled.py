"""Recording a torch.compile'd model: what the recorder costs after warm-up (issue 41 item 3).

    PYTHONPATH=. python scripts/bench_compiled.py [--repeats 5] [--backend inductor|eager]
        [--clip sample_audio/angry_01.wav] [--max-new-tokens 48]

Compiles both demo models with `torch.compile(model)` (the user's way: the whole module, so the
recorder's forward hooks are inside what dynamo sees), runs examples/decoders/correct.py plain
and under the Recorder, warm-up first, then interleaved repeats; prints the medians, their ratio
(issue 41's target: <= 1.3x) and the graph breaks dynamo counted during the recorded repeats
(the hooks are torch.compiler.disable'd: they run eagerly around the model's graph, never inside
it). Timing, so a script and not a test (tests/test_recorder_compiled.py asserts behaviour)."""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--backend", default="inductor")
    ap.add_argument("--clip", default=str(ROOT / "sample_audio" / "angry_01.wav"))
    ap.add_argument("--max-new-tokens", type=int, default=48)
    a = ap.parse_args()
    torch.set_num_threads(1)
    from torch._dynamo.utils import counters

    from specdec_core.api import load_backend, prepare
    from specdec_core.decoding.config import DecodeConfig
    from specdec_core.recorder import Recorder

    spec = importlib.util.spec_from_file_location("correct", ROOT / "examples/decoders/correct.py")
    loop = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loop)
    b = load_backend("demo")
    p = prepare(b, a.clip, DecodeConfig(prompt_type="detailed"))
    edge, cloud = torch.compile(b.edge, backend=a.backend), torch.compile(b.cloud, backend=a.backend)

    def once(recorded: bool) -> float:
        t = time.perf_counter()
        with torch.no_grad():
            if recorded:
                with Recorder(b.edge, b.cloud, b.tokenizer, p.input_ids, b.stop_ids, k=4) as rec:
                    out = loop.decode(edge, cloud, b.tokenizer, p.input_ids, k=4,
                                      max_new_tokens=a.max_new_tokens, stop_ids=b.stop_ids)
                rec.finish(out)
            else:
                loop.decode(edge, cloud, b.tokenizer, p.input_ids, k=4,
                            max_new_tokens=a.max_new_tokens, stop_ids=b.stop_ids)
        return time.perf_counter() - t

    t0 = time.perf_counter()
    for _ in range(2):                                      # warm-up: compile every shape
        once(False), once(True)
    print(f"warm-up {time.perf_counter() - t0:.1f} s", flush=True)
    counters.clear()
    plain, rec = [], []
    for _ in range(a.repeats):
        plain.append(once(False))
        rec.append(once(True))
    mp, mr = statistics.median(plain), statistics.median(rec)
    print(f"plain median {mp:.3f} s {[round(x, 3) for x in plain]}")
    print(f"recorded median {mr:.3f} s {[round(x, 3) for x in rec]}")
    print(f"recorded / plain {mr / mp:.2f}x (target <= 1.3x)")
    print(f"graph breaks after warm-up: {sum(counters['graph_break'].values())} "
          f"{dict(counters['graph_break'])}")


if __name__ == "__main__":
    main()
