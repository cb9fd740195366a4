"""One diagnosis path: for each fault of the zoo, `run --fault X` (api.run_clip, what the CLI,
batch and the Live tab use) and `record` of the same bug written as a loop
(examples/decoders/X.py) give the same ONE top-level error, naming the mechanism; the symptoms
are nested under it (explained_by). Correct loops and runs give no error."""
from __future__ import annotations

from pathlib import Path

import pytest

from specdec_core.api import load_backend, run_clip
from specdec_core.decoding.config import DecodeConfig
from specdec_core.recorder.driver.clip import load_function, record_clip


def top_level(found: list, severity: str = "error") -> list:
    """The findings of `severity` no root cause explains (what the report leads with)."""
    return [f for f in found if f["severity"] == severity and not f.get("explained_by")]


ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "decoders"
CLIPS = [str(ROOT / "sample_audio" / "heldout2" / "neutral_m2.wav"),
         str(ROOT / "sample_audio" / "unheard" / "worried_klatt3.wav")]
GREEDY = {"k": 4, "max_new_tokens": 128, "temperature": 0.0, "verify": "greedy", "prompt_type": "detailed"}
SAMPLING = {**GREEDY, "temperature": 0.7, "verify": "sampling"}
# the mechanism each fault names
ZOO = {"no_resync": "stale_cache", "mask_1x1": "position_error", "input_corruption": "context_mismatch",
       "string_stop": "unverified_end", "special_text_stop": "missed_eos",
       "draft_penalties": "hidden_draft_processing", "lenient_rank": "lossless_violation",
       "double_temperature": "hidden_draft_processing"}
# double_temperature acts only on sampled drafts, and one clip has little evidence of the
# temperature (pooled over clips it is an error: test_recorder_examples): that one or none
LATENT = {"double_temperature"}


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


def errors(findings) -> list[str]:
    return [f["code"] for f in top_level(findings)]


def recorded(demo, name, clip, knobs=GREEDY) -> list:
    fn, path = load_function(f"{EXAMPLES / name}.py:decode")
    res = record_clip(fn, path, demo, clip, dict(knobs))
    assert res["ok"], res
    return res["findings"]


# the tree faults (issue 34) act on draft_tree = static | dynamic; their loops are the tree_*.py
# examples (a Medusa-style static tree). fault -> (example loop, the code it names, severity)
TREE_ZOO = {"no_compaction": ("tree_no_compaction", "stale_cache", "error"),
            "linear_positions": ("tree_linear_positions", "tree_positions", "error"),
            "sibling_mask": ("tree_sibling_mask", "tree_mask", "error"),
            "tree_parent_slots": ("tree_parent_slots", "draft_context", "warning")}


# the head faults (issue 35) act on drafter=head; their loops are examples/decoders/head_*.py.
# fault -> (example loop, the code it names, severity, knobs)
HEAD_ZOO = {"stale_features": ("head_stale_features", "stale_features", "warning", GREEDY)}
# raw_q (q from the raw logits, transformers #47932) is found in the built-in decoder by its q
# check (acceptance_rule); in a user's loop only the recorder's statistics see it, pooled over
# clips at a low temperature (docs/recorder.md): no per-clip parity
BUILTIN_ONLY = {"raw_q": "acceptance_rule"}


def test_zoo_is_complete():
    from specdec_core.decoding.faults import FAULTS

    assert set(FAULTS) == set(ZOO) | set(TREE_ZOO) | set(HEAD_ZOO) | set(BUILTIN_ONLY)


@pytest.mark.parametrize("fault", sorted(HEAD_ZOO))
def test_head_fault_and_its_head_loop_name_the_same_mechanism(demo, fault):
    """run --fault X --set drafter=head and record of the user-style head loop with the same
    bug: the same top-level code, from the same recorder check; no error on either."""
    example, code, severity, knobs = HEAD_ZOO[fault]
    cfg = DecodeConfig(faults=[fault], drafter="head",
                       **{k: v for k, v in knobs.items() if k != "prompt_type"})
    for clip in CLIPS:
        run = run_clip(demo, clip, cfg)["trace"]["diagnostics"]
        rec = recorded(demo, example, clip, knobs)
        assert top(run, severity) == top(rec, severity) == [code], (clip, run, rec)
        assert top(run, "error") == top(rec, "error") == [], (clip, run, rec)


def top(findings, severity):
    return [f["code"] for f in top_level(findings, severity)]


@pytest.mark.parametrize("fault", sorted(TREE_ZOO))
def test_tree_fault_and_its_tree_loop_name_the_same_mechanism(demo, fault):
    """run --fault X --draft-tree static and record of the tree loop with the same bug: the same
    top-level code (an error, or draft_context's warning for the lossless parent-slots bug)."""
    example, code, severity = TREE_ZOO[fault]
    cfg = DecodeConfig(faults=[fault], draft_tree="static", k=4, max_new_tokens=128)
    for clip in CLIPS:
        run = run_clip(demo, clip, cfg)["trace"]["diagnostics"]
        rec = recorded(demo, example, clip)
        assert top(run, severity) == top(rec, severity) == [code], (clip, run, rec)
        if severity == "warning":
            assert top(run, "error") == top(rec, "error") == [], (clip, run, rec)


@pytest.mark.parametrize("shape", ["static", "dynamic"])
def test_correct_tree_runs_give_no_error(demo, shape):
    for clip in CLIPS:
        res = run_clip(demo, clip, DecodeConfig(draft_tree=shape, max_new_tokens=96))
        assert res["ok"] and errors(res["trace"]["diagnostics"]) == [], res["trace"]["diagnostics"]


@pytest.mark.parametrize("fault", sorted(ZOO))
def test_run_fault_and_record_of_its_loop_give_the_same_one_error(demo, fault):
    knobs = SAMPLING if fault in LATENT else GREEDY
    cfg = DecodeConfig(faults=[fault], **{k: v for k, v in knobs.items() if k != "prompt_type"})
    for clip in CLIPS:
        run = run_clip(demo, clip, cfg)["trace"]["diagnostics"]
        rec = recorded(demo, fault, clip, knobs)
        if fault in LATENT:
            assert errors(run) in ([], [ZOO[fault]]) and errors(rec) in ([], [ZOO[fault]]), (run, rec)
        else:
            assert errors(run) == errors(rec) == [ZOO[fault]], (clip, run, rec)
        for found in (run, rec):    # every other error is a symptom nested under the root
            assert all(f["explained_by"] == ZOO[fault] for f in found
                       if f["severity"] == "error" and f["code"] != ZOO[fault])


def test_no_resync_symptoms_are_nested_under_stale_cache(demo):
    found = recorded(demo, "no_resync", str(ROOT / "sample_audio" / "sad_01.wav"))
    nested = {f["code"]: f["explained_by"] for f in found if f["explained_by"]}
    assert nested.get("context_mismatch") == "stale_cache"
    assert nested.get("unverified_end") == "stale_cache"
    assert errors(found) == ["stale_cache"]
    # folded under the root in the CLI reports and on the page, still in the JSON
    from components.findings import findings_html, findings_summary
    from specdec_core.cli.reports import finding_lines
    from specdec_core.cli.reports import by_severity as _by_severity

    assert _by_severity(found).startswith("1 error: stale_cache (explains context_mismatch")
    lines = finding_lines(found)
    assert lines[0].startswith("error: stale_cache:") and lines[1].startswith("  └ explained by stale_cache:")
    html = findings_html(found)
    assert html.count('data-explained-by="stale_cache"') == len(nested)
    assert html.index('data-code="stale_cache"') < html.index('data-explained-by="stale_cache"')
    assert "(stale cache)" in findings_summary(found) and "context mismatch" not in findings_summary(found)


@pytest.mark.parametrize("name,knobs", [
    ("correct", GREEDY), ("hf_assisted_default", GREEDY), ("hf_early_exit", GREEDY),
    ("hf_prompt_lookup", GREEDY), ("sampling_correct", SAMPLING),
    ("sampling_sample_and_match", SAMPLING), ("sampling_topk_draft", SAMPLING)])
def test_correct_loops_give_no_error(demo, name, knobs):
    for clip in CLIPS:
        assert errors(recorded(demo, name, clip, knobs)) == []


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("verify,temperature", [("greedy", 0.0), ("sampling", 0.7)])
def test_correct_builtin_runs_give_no_error(dtype, verify, temperature):
    backend = load_backend("demo", dtype=dtype)
    for clip in CLIPS:
        res = run_clip(backend, clip, DecodeConfig(verify=verify, temperature=temperature, max_new_tokens=96))
        assert res["ok"] and errors(res["trace"]["diagnostics"]) == [], res["trace"]["diagnostics"]


def test_correct_loop_in_bfloat16_gives_no_error():
    backend = load_backend("demo", dtype="bfloat16")
    for clip in CLIPS:
        assert errors(recorded(backend, "correct", clip)) == []


@pytest.mark.parametrize("fault", [None, "no_resync", "mask_1x1"])
def test_a_remote_cloud_run_is_judged_by_the_same_checks(demo, fault):
    """--cloud-url: the verify requests are recorded as the cloud's forwards (recorder/
    remote_rows.py), so a correct remote run has no error and a fault names its mechanism."""
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from openai_stub import OpenAIStub
    from specdec_core.backends.remote import RemoteCloud

    with OpenAIStub(demo.cloud, demo.tokenizer) as stub:
        remote = RemoteCloud(demo, stub.url)
        for clip in CLIPS:
            res = run_clip(remote, clip, DecodeConfig(faults=[fault] if fault else [], max_new_tokens=96))
            assert res["ok"], res
            assert errors(res["trace"]["diagnostics"]) == ([ZOO[fault]] if fault else []), res["trace"]["diagnostics"]
