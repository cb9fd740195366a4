"""The Recorder on head drafters (issue 35 item 3): a module fed the cloud's hidden states,
handed to the Recorder as `drafter=`, is recorded like a model (recording["drafter"] == "head")
with a fingerprint of its input features per row; `stale_features` is found blind in a user's
loop (examples/decoders/head_*.py) and in the built-in decoder (the same check), with the
acceptance it costs. Correct head loops and runs get no error."""
from __future__ import annotations

from pathlib import Path

import pytest

from specdec_core.api import load_backend, prepare, run_clip
from specdec_core.decoding.config import DecodeConfig
from specdec_core.recorder.driver.clip import load_function, record_clip


def top_level(found: list, severity: str = "error") -> list:
    """The findings of `severity` no root cause explains (what the report leads with)."""
    return [f for f in found if f["severity"] == severity and not f.get("explained_by")]


ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "decoders"
CLIPS = [str(ROOT / "sample_audio" / "sad_01.wav"),
         str(ROOT / "sample_audio" / "unheard" / "worried_klatt3.wav")]
GREEDY = {"k": 4, "max_new_tokens": 128, "temperature": 0.0, "verify": "greedy", "prompt_type": "detailed"}


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


def record(demo, name, clip):
    fn, path = load_function(f"{EXAMPLES / name}.py:decode")
    res = record_clip(fn, path, demo, clip, dict(GREEDY))
    assert res["ok"], res
    return res


@pytest.fixture(scope="module")
def loops(demo):
    return {(name, clip): record(demo, name, clip)
            for name in ("head_correct", "head_stale_features") for clip in CLIPS}


@pytest.fixture(scope="module")
def cloud_only(demo):
    cfg = DecodeConfig(k=4, max_new_tokens=128, prompt_type="detailed")
    return {c: run_clip(demo, c, cfg, baseline=True)["baseline"]["token_ids"] for c in CLIPS}


def codes(found, severity=None):
    return [f["code"] for f in found if severity is None or f["severity"] == severity]


def stale(found):
    return next((f for f in found if f["code"] == "stale_features"), None)


def test_head_loop_is_recorded_as_a_head_with_feature_fingerprints(loops):
    rec = loops[("head_correct", CLIPS[0])]["recording"]
    assert rec["drafter"] == "head"
    heads = [f for f in rec["forwards"] if f.get("module") == "head"]
    assert heads and all(f["model"] == "edge" for f in heads)
    # ids recovered from the embeddings the loop fed, rows from the cloud's LM head
    assert all(f["ids"] and f["rows"] for f in heads)
    fp = heads[0]["features"]["fp"]
    assert len(fp) == len(heads[0]["ids"]) and len(fp[0]) == 5
    assert heads[-1]["features"]["checked"] > len(rec["prompt_ids"])


def test_correct_head_loop_is_lossless_and_clean(loops, cloud_only):
    for clip in CLIPS:
        res = loops[("head_correct", clip)]
        base = cloud_only[clip]
        assert res["token_ids"][:len(base)] == base, clip
        assert codes(res["findings"], "error") == [] and stale(res["findings"]) is None, res["findings"]


def test_stale_head_loop_is_found_blind_with_its_cost(loops, cloud_only):
    costs = []
    for clip in CLIPS:
        res = loops[("head_stale_features", clip)]
        base = cloud_only[clip]
        assert res["token_ids"][:len(base)] == base, clip     # lossless: only acceptance drops
        f = stale(res["findings"])
        assert f is not None and f["severity"] == "warning", res["findings"]
        assert codes(res["findings"], "error") == []
        assert f["evidence"]["stale_positions"] > 0 and f["evidence"]["rounds"] > 0
        assert "first-draft acceptance" in f["detail"]
        costs.append(f["evidence"]["acceptance_cost"])
    assert max(costs) > 0.05, costs


def test_stale_loop_costs_acceptance_against_the_correct_one(loops):
    def mean_len(name):
        return sum(loops[(name, c)]["trace"]["metrics"]["mean_accepted_length"] for c in CLIPS)
    assert mean_len("head_stale_features") < mean_len("head_correct")


def test_builtin_stale_run_costs_acceptance(demo):
    """(run --fault stale_features and record of the loop name the same code:
    test_diagnosis_parity.py)"""
    run = run_clip(demo, CLIPS[0], DecodeConfig(drafter="head", faults=["stale_features"],
                                                max_new_tokens=128))["trace"]["diagnostics"]
    assert codes(top_level(run, "warning")) == ["stale_features"] and codes(run, "error") == []
    assert stale(run)["evidence"]["acceptance_cost"] > 0
    nested = {f["code"]: f["explained_by"] for f in run if f["explained_by"]}
    assert set(nested.values()) <= {"stale_features"}


def test_builtin_head_runs_are_recorded_with_the_head(demo):
    from specdec_core.recorder.driver.builtin import record_builtin

    cfg = DecodeConfig(drafter="head", verify="sampling", temperature=0.8, max_new_tokens=96)
    rec, _trace, found, own = record_builtin(demo, prepare(demo, CLIPS[1], cfg), cfg)
    assert rec["drafter"] == "head"
    assert sum(f.get("module") == "head" for f in rec["forwards"]) >= own.metrics["cloud_calls"]
    assert codes(found, "error") == [] and stale(found) is None, found


def test_a_decoder_asking_for_a_head_on_a_backend_without_one_is_a_user_error(demo):
    import copy

    from specdec_core.errors import UserError
    from specdec_core.recorder.driver.clip import head_drafter

    fn, _ = load_function(f"{EXAMPLES / 'head_correct'}.py:decode")
    bare = copy.copy(demo)
    bare.head = None
    with pytest.raises(UserError, match="head drafter"):
        head_drafter(fn, bare)
    correct, _ = load_function(f"{EXAMPLES / 'correct'}.py:decode")
    assert head_drafter(correct, demo) is None


def test_sampling_head_loop_gets_no_error(demo):
    """The correct sampling head loop: no error. (Its raw-q sibling, head_raw_q.py, is seen
    by the blind statistics only pooled at a low temperature: docs/recorder.md.)"""
    fn, path = load_function(f"{EXAMPLES / 'head_sampling_correct'}.py:decode")
    knobs = {**GREEDY, "temperature": 0.7, "verify": "sampling"}
    for i, clip in enumerate(CLIPS):
        res = record_clip(fn, path, demo, clip, dict(knobs), seed=i)
        assert res["ok"] and res["recording"]["drafter"] == "head"
        assert codes(res["findings"], "error") == [] and stale(res["findings"]) is None, res["findings"]


@pytest.mark.parametrize("shape", ["dynamic", "static"])
def test_head_drafts_trees_greedy_identical_and_clean(demo, shape):
    """drafter=head with draft_tree=dynamic is EAGLE-2: each node fed its parent's predicted
    feature under the tree mask; greedy identical to cloud-only, no finding, the head's tree
    forwards recorded as trees."""
    from specdec_core.recorder.driver.builtin import record_builtin

    cfg = DecodeConfig(drafter="head", draft_tree=shape, max_new_tokens=128)
    for clip in CLIPS:
        res = run_clip(demo, clip, cfg, baseline=True)
        assert res["ok"] and res["token_ids"] == res["baseline"]["token_ids"], clip
        assert [f for f in res["trace"]["diagnostics"] if f["severity"] != "info"
                and f["code"] != "edge_mishears"] == [], res["trace"]["diagnostics"]
    rec = record_builtin(demo, prepare(demo, CLIPS[0], cfg), cfg)[0]
    assert rec["drafter"] == "head" and rec["draft_shape"] == "tree"
    assert any(f.get("module") == "head" and f.get("mask_rows") for f in rec["forwards"])


def test_head_with_a_sampled_tree_is_a_one_line_user_error(demo):
    cfg = DecodeConfig(drafter="head", draft_tree="dynamic", verify="sampling", temperature=0.8)
    res = run_clip(demo, CLIPS[0], cfg)
    assert not res["ok"] and "drafter=head with a draft tree is greedy only" in res["error"]
    assert "\n" not in res["error"] and "Traceback" not in res["error"]


def test_isolated_head_run_records_a_private_head_and_leaves_no_hooks(demo):
    """The Live tab's judged runs (isolated=True) hook private copies, the head's included."""
    from specdec_core.recorder.driver.builtin import judged_stream

    cfg = DecodeConfig(drafter="head", faults=["stale_features"], max_new_tokens=96)
    out: dict = {}
    for ev in judged_stream(demo, prepare(demo, CLIPS[0], cfg), cfg, isolated=True, out=out):
        pass
    assert out["recording"]["drafter"] == "head" and stale(ev["trace"].diagnostics) is not None
    assert not demo.head._forward_hooks and not demo.head._forward_pre_hooks
