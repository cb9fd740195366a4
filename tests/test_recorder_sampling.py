"""Sampling loops under the recorder (issue 18, item 3): the rejection rule checked blind from
p(x) and q(x) of every drafted token, on the real demo pair and sample clips, pooled over clips.

The checks never know which loop they look at. Rates over 20 seeds (measured offline with the
same setup, see docs/recorder.md) are in the docs; here a few fixed seeds keep CI short.
"""
from __future__ import annotations

import functools
import itertools
import math
from pathlib import Path

import pytest

from specdec_core.api import load_backend
from specdec_core.recorder.driver.clip import load_function, pooled_findings, record_clip
from specdec_core.recorder.checks.sampling.rule import _poibin

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "decoders"
CLIPS = sorted(str(p) for p in (ROOT / "sample_audio").glob("*.wav"))[:12]
KNOBS = {"k": 8, "max_new_tokens": 128, "temperature": 1.0, "verify": "sampling",
         "prompt_type": "detailed"}
SAMPLING = {"acceptance_rule", "greedy_draft_sampling", "residual_mismatch"}


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


def record(demo, name, seed, **knobs):
    """Each clip gets its own seed (pooled runs must be independent evidence)."""
    fn, path = load_function(f"{EXAMPLES / name}.py:decode")
    res = [record_clip(functools.partial(fn, seed=1000 * seed + i), path, demo, c,
                       {**KNOBS, **knobs}) for i, c in enumerate(CLIPS)]
    assert all(r["ok"] for r in res), [r.get("error") for r in res]
    return res


def sampling_codes(res) -> tuple[set, set]:
    per = {f["code"] for r in res for f in r["findings"]} & SAMPLING
    return per, {f["code"] for f in pooled_findings(res)} & SAMPLING


def test_poisson_binomial_matches_enumeration():
    a = [0.1, 0.5, 0.93, 0.999, 0.3]
    want = [0.0] * (len(a) + 1)
    for bits in itertools.product((0, 1), repeat=len(a)):
        want[sum(bits)] += math.prod(x if b else 1 - x for x, b in zip(a, bits))
    assert [round(x, 12) for x in _poibin(a)] == [round(x, 12) for x in want]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_correct_sampling_loop_is_quiet(demo, seed):
    res = record(demo, "sampling_correct", seed)
    per, pooled = sampling_codes(res)
    assert per == set() and pooled == set(), (per, pooled)
    # the recording carries what p and q at T need, and rejections did happen
    rows = [f["rows"] for r in res for f in r["recording"]["forwards"] if f.get("rows")]
    assert rows and all(len(x["lse_t"]) == len(x["argmax"]) for x in rows)
    assert any(t["source"] == "corrected" for r in res for t in r["trace"]["tokens"])


@pytest.mark.parametrize("name,code", [("sampling_accept_if_greater", "acceptance_rule"),
                                       ("sampling_greedy_draft", "greedy_draft_sampling"),
                                       ("sampling_residual_from_p", "residual_mismatch")])
@pytest.mark.parametrize("seed", [0])
def test_buggy_sampling_loop_gets_its_own_code(demo, name, code, seed):
    res = record(demo, name, seed)
    per, pooled = sampling_codes(res)
    assert pooled == {code}, (per, pooled)
    assert per <= {code}
    f = next(f for f in pooled_findings(res) if f["code"] == code)
    assert f["severity"] == "error" and f["cause"] and f["fix"]
    if code == "greedy_draft_sampling":     # one cause, one code: not also a temperature finding
        assert "hidden_draft_processing" not in {g["code"] for g in pooled_findings(res)}


def test_greedy_declared_recording_is_not_checked_for_sampling(demo):
    """verify=greedy: no lse_t stored (no extra cost), no sampling finding."""
    fn, path = load_function(f"{EXAMPLES / 'correct'}.py:decode")
    res = record_clip(fn, path, demo, CLIPS[0], {**KNOBS, "temperature": 0.0, "verify": "greedy"})
    assert res["ok"] and not {f["code"] for f in res["findings"]} & SAMPLING
    assert all("lse_t" not in f["rows"] for f in res["recording"]["forwards"] if f.get("rows"))
