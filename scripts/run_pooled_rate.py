"""How often `run`'s pooled findings name the doubled temperature (issue 42, item 5): the
built-in decoder with and without `--fault double_temperature` at a declared T = 0.7 (verify
greedy, the `run` defaults), and examples/decoders/double_temperature.py under `record`, over N
seed sets of 4 clips (clip i of set s: seed 1000*s + i, as `run`/`record` give clip i seed + i).
Prints per path the seed sets where pooled `hidden_draft_processing` was named, the per-clip
count, and any other finding. docs/recorder.md has the numbers.

    PYTHONPATH=. python scripts/run_pooled_rate.py [--sets 20] [--clips heldout2|sample]
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CLIPS = {"heldout2": sorted(str(p) for p in (ROOT / "sample_audio" / "heldout2").glob("*.wav"))[:4],
         "sample": [str(ROOT / "sample_audio" / f"{c}_01.wav") for c in ("angry", "happy", "sad", "neutral")]}
T = 0.7


def builtin(backend, clips, seed_set: int, fault: bool):
    from specdec_core.api import run_clip
    from specdec_core.decoding.config import DecodeConfig

    cfg = DecodeConfig.from_overrides({}, [f"temperature={T}"], ["double_temperature"] if fault else [])
    done = []
    for i, c in enumerate(clips):
        res = run_clip(backend, c, dataclasses.replace(cfg, seed=1000 * seed_set + i))
        assert res["ok"], res.get("error")
        done.append({"ok": True, "recording": res.recording, "trace": res["trace"],
                     "findings": res["trace"].get("diagnostics") or []})
    return done


def recorded(backend, clips, seed_set: int):
    from specdec_core.recorder import load_function, record_clip

    fn, path = load_function(str(ROOT / "examples" / "decoders" / "double_temperature.py"))
    knobs = {"k": 4, "max_new_tokens": 128, "temperature": T, "verify": "greedy", "prompt_type": "detailed"}
    return [record_clip(fn, path, backend, c, knobs, seed=1000 * seed_set + i) for i, c in enumerate(clips)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", type=int, default=20)
    ap.add_argument("--clips", choices=sorted(CLIPS), default="heldout2")
    ap.add_argument("--paths", default="run_fault,run_clean,record_fault")
    a = ap.parse_args()
    import torch

    from specdec_core.api import load_backend
    from specdec_core.recorder import pooled_findings

    torch.set_num_threads(1)
    backend, clips = load_backend("demo"), CLIPS[a.clips]
    make = {"run_fault": lambda s: builtin(backend, clips, s, True),
            "run_clean": lambda s: builtin(backend, clips, s, False),
            "record_fault": lambda s: recorded(backend, clips, s)}
    for name in a.paths.split(","):
        named, per_clip, other = 0, 0, Counter()
        for s in range(a.sets):
            res = make[name](s)
            pooled = pooled_findings(res)
            hit = any(f["code"] == "hidden_draft_processing" for f in pooled)
            named += hit
            per_clip += sum(any(f["code"] == "hidden_draft_processing" for f in r["findings"]) for r in res)
            other.update(f["code"] for r in res for f in r["findings"] if f["code"] != "hidden_draft_processing")
            other.update("pooled:" + f["code"] for f in pooled if f["code"] != "hidden_draft_processing")
            print(f"  {name} set {s}: pooled {'named' if hit else '-'} "
                  f"{[(f['code'], f['severity']) for f in pooled]}", flush=True)
        print(f"{name} ({a.clips}, 4 clips, T={T}): pooled hidden_draft_processing in {named}/{a.sets} "
              f"seed sets; per clip {per_clip}/{4 * a.sets}; other findings {dict(other)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
