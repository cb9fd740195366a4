"""Issue 55.4: every judged result holds its metrics to their identities, as the audit holds
engines to theirs: rounds = verify forwards (or the result says why they differ), accepted <=
drafted, acceptance = accepted / drafted, mean accepted length = 1 + accepted / rounds, the
coloured tokens add up to the output (specdec_core/result.py `identities`). Every example
decoder (one short clip each, on the demo pair) and the built-in decoder are run through them."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest

from specdec_core.api import load_backend, run_clip
from specdec_core.decoding.config import DecodeConfig
from specdec_core.recorder.driver.clip import load_function, record_clip
from specdec_core.result import ClipResult, identities

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "decoders"
CLIP = str(ROOT / "sample_audio" / "happy_01.wav")
# every loop (a file with a `decode`; the tiny Omni pair is built by a script:
# tests/test_recorder_omni.py); gpt_fast_head raises on this pair (tests/test_wild_decoders.py)
LOOPS = sorted(str(p.relative_to(EXAMPLES)) for p in EXAMPLES.rglob("*.py") if "omni" not in p.parts
               and "\ndef decode(" in p.read_text(encoding="utf-8"))
RAISES = {"wild/gpt_fast_head.py"}


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


def broken(res) -> list[str]:
    assert res["ok"], res.get("error")
    return res.identities()


@pytest.mark.parametrize("name", LOOPS)
def test_every_example_decoder_holds_the_metric_identities(demo, name):
    fn, path = load_function(str(EXAMPLES / name))
    t = fn.__globals__.get("TEMPERATURE") or 0.0
    res = record_clip(fn, path, demo, CLIP, {"k": 4, "max_new_tokens": 16, "temperature": t,
                                             "verify": "sampling" if t else "greedy",
                                             "prompt_type": "detailed"}, seed=0)
    if name in RAISES:
        assert not res["ok"] and "decoder failed" in res["error"]
        return
    assert broken(res) == []
    # a result that says why its rounds differ from its verify forwards (a batch's row: forwards
    # run after its output was complete) is held to its reason, not waived
    said = res["trace"]["metrics"].get("rounds_differ")
    if said:                  # the forwards it names verify nothing: without them rounds = forwards
        C, cloud = res.evidence.t.C, [f for f in res.evidence.t.fwds if f.model == "cloud"]
        named = [f for f in cloud if f.i in said["forwards"]]
        assert named and all(f.first_q >= len(C) - 1 and f.ctx[:len(C)] == C for f in named), said
        n = sum(r["verified"] for r in res["trace"]["rounds"])
        counts = (len(cloud), sum(len(f.ctx) > res.evidence.t.P for f in cloud))
        assert n in {c - len(named) for c in counts}, (n, counts, said)
        assert "after the output was complete" in said["why"]


@pytest.mark.parametrize("cfg", [DecodeConfig(max_new_tokens=16),
                                 DecodeConfig(max_new_tokens=16, temperature=0.7, verify="sampling"),
                                 DecodeConfig(max_new_tokens=16, draft_tree="dynamic"),
                                 DecodeConfig(max_new_tokens=16, drafter="head")],
                         ids=["greedy", "sampling", "tree", "head"])
def test_the_builtin_decoder_holds_the_metric_identities(demo, cfg):
    res = run_clip(demo, CLIP, cfg)
    assert isinstance(res, ClipResult) and res.evidence is not None and res.recording
    assert broken(res) == []


def test_each_identity_is_checked():
    """A trace that holds them all, then each broken on its own, named."""
    td = {"token_ids": [1, 2, 3, 4, 5],
          "tokens": [{"source": s} for s in ("accepted", "accepted", "corrected", "accepted", "bonus")],
          "rounds": [{"round": 0, "verified": True, "drafted": 4, "accepted": 2},
                     {"round": 1, "verified": True, "drafted": 1, "accepted": 1}],
          "metrics": {"target_forwards": 2, "acceptance_rate": 0.6, "mean_accepted_length": 2.5}}
    assert identities(td) == []
    for change, name in ((lambda d: d["metrics"].update(target_forwards=3), "rounds"),
                         (lambda d: d["rounds"][1].update(accepted=2, drafted=1), "accepted <= drafted"),
                         (lambda d: d["metrics"].update(acceptance_rate=0.0), "acceptance"),
                         (lambda d: d["metrics"].update(mean_accepted_length=2.0), "mean accepted length"),
                         (lambda d: d["tokens"].pop(), "coloured tokens")):
        bad = copy.deepcopy(td)
        change(bad)
        assert name in [line.split(":")[0] for line in identities(bad)], (name, identities(bad))
    said = copy.deepcopy(td)
    said["metrics"].update(target_forwards=3, rounds_differ="a prefill forward verifies nothing")
    assert identities(said) == []
