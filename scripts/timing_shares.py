"""The overhead shares behind the loop_overhead threshold (docs/recorder.md, "Where the time
goes"): each example loop recorded on a few sample clips, plus our own decoder (its own split,
and recorded by the flight recorder like a user's loop). One torch thread.

    PYTHONPATH=. python scripts/timing_shares.py [CLIP ...]
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
LOOPS = ["correct.py", "slow_decode_text.py", "rerun_prompt.py", "wild/hf_assisted.py",
         "wild/romsto.py"]
CLIPS = ["angry_01.wav", "sad_01.wav", "happy_02.wav", "worried_03.wav"]


def recomputed_share(rec: dict, findings: list[dict]) -> float:
    """Share of the forwards' time spent on recomputed positions (also below the threshold)."""
    from specdec_core.recorder.checks.speed.speed import recomputed, recording_split
    from specdec_core.recorder.evidence.tape import build_tapes

    rc, split = recomputed(build_tapes(rec)), recording_split(rec)
    fwd = split["edge_s"] + split["cloud_s"]
    return sum(v["time_s"] for v in rc.values()) / fwd if fwd else 0.0


def main(clips: list[str]) -> None:
    from specdec_core.api import prepare
    from specdec_core.backends import load_backend
    from specdec_core.decoding.config import DecodeConfig
    from specdec_core.decoding.decoder import SpeculativeDecoder
    from specdec_core.recorder import record_builtin
    from specdec_core.recorder import DEFAULTS, load_function, record_clip

    torch.set_num_threads(1)
    b = load_backend("demo")
    paths = [ROOT / "sample_audio" / c for c in clips]
    rows = {}
    for loop in LOOPS:
        fn, path = load_function(f"{ROOT}/examples/decoders/{loop}:decode")
        for c in paths:
            res = record_clip(fn, path, b, c, dict(DEFAULTS))
            codes = sorted({f["code"] for f in res["findings"]} & {"loop_overhead", "recomputed_context"})
            rc = recomputed_share(res["recording"], res["findings"])
            rows.setdefault(loop, []).append((res["time_split"]["other_share"], rc, codes))
    cfg = DecodeConfig()
    for c in paths:
        prompt = prepare(b, c, cfg)
        tr = SpeculativeDecoder(b, cfg).run(prompt)
        rows.setdefault("ours (own split)", []).append((tr.metrics["time_split"]["other_share"], 0.0, []))
        rec, rtr, found, _ = record_builtin(b, prompt, cfg)
        codes = sorted({f["code"] for f in found} & {"loop_overhead", "recomputed_context"})
        rc = recomputed_share(rec, found)
        rows.setdefault("ours (recorded)", []).append((rtr.metrics["time_split"]["other_share"], rc, codes))
    print(f"{'loop':24s} {'other share (min-median-max)':>30s} {'recomputed (time share)':>24s}  findings per clip")
    for loop, rs in rows.items():
        sh = [r[0] for r in rs]
        print(f"{loop:24s} {min(sh):8.3f} {statistics.median(sh):8.3f} {max(sh):8.3f}     "
              f"{max(r[1] for r in rs):24.2f}  {[r[2] for r in rs]}")


if __name__ == "__main__":
    main(sys.argv[1:] or CLIPS)
