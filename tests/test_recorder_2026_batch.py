"""Issue 48, item 4: a ragged batch whose rollback ZEROES the rejected key/value tail instead of
masking it (mlx-vlm #1962 / #2113). The masked loop (examples/decoders/field/ragged_masked.py)
gets no error and each clip's row is its greedy decode; its twin (ragged_zeroed.py) is named
`zeroed_kv` on every clip, the cache as the root, and the positions it makes look wrong
(position_error) are its symptom, never the root. Greedy only (the loop has no sampling)."""
from __future__ import annotations

from pathlib import Path

import pytest

from specdec_core.api import load_backend
from specdec_core.recorder import load_function, record_clip
from specdec_core.recorder.report.roots import top_level

ROOT = Path(__file__).resolve().parents[1]
FIELD = ROOT / "examples" / "decoders" / "field"
CLIPS = [str(ROOT / "sample_audio" / f"{c}.wav") for c in ("angry_01", "happy_02")]
GREEDY = {"k": 4, "max_new_tokens": 24, "temperature": 0.0, "verify": "greedy", "prompt_type": "detailed"}


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


def record(demo, name, reference=False):
    fn, path = load_function(str(FIELD / name))
    out = [record_clip(fn, path, demo, c, GREEDY, reference=reference) for c in CLIPS]
    assert all(r["ok"] for r in out), [r.get("error") for r in out]
    return out


def test_masked_ragged_rollback_gets_no_error(demo):
    for res in record(demo, "ragged_masked.py", reference=True):
        assert [f["code"] for f in res["findings"] if f["severity"] == "error"] == [], res["findings"]
        assert res["reference"]["matches"], res["reference"]["first_divergence"]
        assert any(f["code"] == "batch_rows" for f in res["findings"])
        fw = res["recording"]["forwards"]
        assert not any(r.get("zeroed") for f in fw for r in f.get("batch_rows") or [])


def test_zeroed_tail_is_named_as_the_cache_not_the_positions(demo):
    for res in record(demo, "ragged_zeroed.py"):
        roots = top_level(res["findings"])
        assert roots and {f["code"] for f in roots} == {"zeroed_kv"}, res["findings"]
        z = next(f for f in roots if "(the clip)" in f["title"])
        assert z["evidence"]["slots"] and z["evidence"]["max_slots"] >= 1
        assert "mask" in z["fix"] and "crop" in z["fix"]
        for f in res["findings"]:
            if f["code"] == "position_error":
                assert f["explained_by"] == "zeroed_kv"

