"""Where our decoder's time goes outside the models' forwards (issue 20 item 4).

    python scripts/profile_decoder.py [--clips 18] [--repeats 3] [--untraced] [--html out.html]

Decodes the sample clips (greedy, k=4, the bench config) with SpeculativeDecoder under
pyinstrument and prints the share of the decode spent outside the two models' forwards
(`self.model(...)` in ModelRunner: everything under it, transformers' own wrappers included,
counts as forward), then the heaviest non-forward frames. Proportions from a sampling profiler
stay meaningful on a loaded machine where absolute times do not.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections import Counter

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402


def forward_time(frame) -> float:
    """Seconds under the model calls made by ModelRunner (frames below runner.py's _forward /
    recompute_last that are not runner.py itself)."""
    if frame.file_path and frame.file_path.endswith("decoding/runner.py") and frame.function in (
            "_forward", "recompute_last"):
        return sum(c.time for c in frame.children
                   if not (c.file_path or "").endswith("decoding/runner.py") and c.function != "[self]")
    return sum(forward_time(c) for c in frame.children)


def own_frames(frame, out: Counter, under_forward: bool = False) -> None:
    """Self time of every non-forward frame, by function."""
    if frame.file_path and frame.file_path.endswith("decoding/runner.py") and frame.function in (
            "_forward", "recompute_last"):
        for c in frame.children:
            fwd = not (c.file_path or "").endswith("decoding/runner.py") and c.function != "[self]"
            if not fwd:
                own_frames(c, out, False)
        return
    if frame.function == "[self]" or not frame.children:
        key = f"{frame.function} ({os.path.basename(frame.file_path or '')}:{frame.line_no})"
        if frame.function == "[self]" and frame.parent is not None:
            p = frame.parent
            key = f"{p.function} ({os.path.basename(p.file_path or '')}:{p.line_no}) [self]"
        out[key] += frame.time
        return
    for c in frame.children:
        own_frames(c, out, under_forward)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clips", type=int, default=18)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--untraced", action="store_true")
    ap.add_argument("--interval", type=float, default=0.0002)
    ap.add_argument("--html")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    torch.set_num_threads(1)
    from pyinstrument import Profiler

    from specdec_core.backends import load_backend
    from specdec_core.decoding.decoder import SpeculativeDecoder
    from specdec_core.evaluation.bench.run import bench_config, sample_prompts

    backend = load_backend("demo")
    prompts = sample_prompts(backend, a.clips)
    cfg = bench_config(k=4)
    for p in prompts:     # warm-up
        SpeculativeDecoder(backend, cfg, trace=not a.untraced, dependence=False).run(p)
    prof = Profiler(interval=a.interval)
    prof.start()
    for _ in range(a.repeats):
        for p in prompts:
            SpeculativeDecoder(backend, cfg, trace=not a.untraced, dependence=False).run(p)
    prof.stop()
    root = prof.last_session.root_frame()
    total = root.time
    fwd = forward_time(root)
    print(f"decode {total:.3f} s sampled, model forwards {fwd:.3f} s, "
          f"outside the forwards {total - fwd:.3f} s = {(total - fwd) / total:.1%}")
    c = Counter()
    own_frames(root, c)
    print("heaviest non-forward frames (self time, share of the decode):")
    for k, v in c.most_common(a.top):
        print(f"  {v / total:6.1%}  {k}")
    if a.html:
        with open(a.html, "w") as f:
            f.write(prof.output_html())


if __name__ == "__main__":
    main()
