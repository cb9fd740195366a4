"""The recorder on token-tree loops (issue 34, item 4): user-style tree loops in
examples/decoders/ (Medusa-style static tree with in-place KV copy-down, EAGLE-2-style dynamic
tree drafted by the edge, and one loop per tree bug) recorded on the demo pair and real clips."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from specdec_core.api import load_backend
from specdec_core.recorder.observe import tree_hooks
from specdec_core.recorder.analyze import analyze
from specdec_core.recorder.driver.clip import load_function, record_clip

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "decoders"
KNOBS = {"k": 4, "max_new_tokens": 128, "temperature": 0.0, "verify": "greedy",
         "prompt_type": "detailed"}
CLIPS = [str(ROOT / "sample_audio" / "sad_01.wav"),
         sorted(str(p) for p in (ROOT / "sample_audio" / "heldout2").glob("*.wav"))[0],
         sorted(str(p) for p in (ROOT / "sample_audio" / "unheard").glob("*.wav"))[-1]]
CORRECT = ("tree_correct", "tree_eagle_correct")
FAULTS = {"tree_no_compaction": "stale_cache", "tree_linear_positions": "tree_positions",
          "tree_sibling_mask": "tree_mask", "tree_parent_slots": "draft_context"}


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


_cache: dict = {}


def record(demo, name, clip, reference=False):
    key = (name, clip, reference)
    if key not in _cache:
        fn, path = load_function(f"{EXAMPLES / name}.py:decode")
        res = record_clip(fn, path, demo, clip, dict(KNOBS), reference=reference)
        assert res["ok"], res.get("error")
        _cache[key] = res
    return _cache[key]


def codes(res, severity=None):
    return {f["code"] for f in res["findings"] if severity in (None, f["severity"])}


def tree_rounds(res):
    return [r for r in res["trace"]["rounds"] if r.get("tree")]


@pytest.mark.parametrize("name", CORRECT)
@pytest.mark.parametrize("clip", CLIPS, ids=lambda c: Path(c).stem)
def test_correct_tree_loop_is_clean_and_greedy(demo, name, clip):
    res = record(demo, name, clip, reference=True)
    assert res["reference"]["matches"], "a correct tree loop must equal the cloud's greedy decode"
    assert codes(res, "error") == set(), [f["title"] for f in res["findings"]]
    rec = res["recording"]
    assert rec["draft_shape"] == "tree" and rec["drafter"] == "model"
    rounds = tree_rounds(res)
    assert len(rounds) >= 5
    for r in rounds:
        nodes, path = r["tree"]["nodes"], r["tree"]["path"]
        assert {n["status"] for n in nodes} <= {"accepted", "rejected"}
        assert [nodes[i]["status"] for i in path] == ["accepted"] * len(path)
        assert [nodes[i]["depth"] for i in path] == list(range(1, len(path) + 1))
        for a, b in zip(path, path[1:]):
            assert nodes[b]["parent"] == a
        assert r["accepted"] == len(path)          # the round is the accepted path as a chain
    branching = [r for r in rounds
                 if len({n["parent"] for n in r["tree"]["nodes"]}) < len(r["tree"]["nodes"])]
    assert branching, "the trees must branch"
    assert any(n["draft_logp"] is not None and n["status"] == "rejected"
               for r in rounds for n in r["tree"]["nodes"])


def test_copy_down_is_followed_not_stale(demo):
    """Medusa's copy-down rewrites the cloud cache in place between forwards: the hooks see it
    (slot_moves) and the next forward's cache is read as the accepted path."""
    res = record(demo, "tree_correct", CLIPS[0], reference=True)
    moves = [f for f in res["recording"]["forwards"] if f.get("slot_moves")]
    assert moves and all(f["model"] == "cloud" for f in moves)
    assert not codes(res) & {"stale_cache", "context_mismatch", "position_error"}


@pytest.mark.parametrize("name", FAULTS)
@pytest.mark.parametrize("clip", CLIPS[:2], ids=lambda c: Path(c).stem)
def test_tree_fault_found_by_its_code(demo, name, clip):
    res = record(demo, name, clip)
    assert FAULTS[name] in codes(res), [f["title"] for f in res["findings"]]
    errors = codes(res, "error") - {"doubling", "cycle", "template_leak", "punct_flood"}
    expected = {FAULTS[name]} if name != "tree_parent_slots" else set()
    assert errors == expected, [f["title"] for f in res["findings"]]
    for good in CORRECT:
        assert FAULTS[name] not in codes(record(demo, good, clip, reference=True))


def test_parent_slots_is_lossless_and_costs_acceptance(demo):
    """Drafting from the wrong slots changes drafts only: the output stays the cloud's, the
    accepted drafts do not grow (on the demo pair's one-layer edge the cost is small: 3.46 ->
    3.44 per verify over the 50 clips), and the warning says what it costs."""
    accepted = {}
    for name in ("tree_eagle_correct", "tree_parent_slots"):
        res = [record(demo, name, c) for c in CLIPS]
        accepted[name] = sum(r["accepted"] for x in res for r in tree_rounds(x))
    ref = [record(demo, "tree_eagle_correct", c, reference=True)["token_ids"] for c in CLIPS]
    assert [record(demo, "tree_parent_slots", c)["token_ids"] for c in CLIPS] == ref
    assert accepted["tree_parent_slots"] <= accepted["tree_eagle_correct"], accepted
    warn = next(f for f in record(demo, "tree_parent_slots", CLIPS[0])["findings"]
                if f["code"] == "draft_context")
    assert warn["severity"] == "warning" and warn["evidence"]["mean_accepted"] > 0


def test_tree_without_mask_argument_is_inferred(demo):
    """An attention patched to read its mask from the model: the recording has the repeated
    positions but no mask. The tree is inferred from positions and rows, and said so."""
    res = record(demo, "tree_correct", CLIPS[0], reference=True)
    rec = copy.deepcopy(res["recording"])
    for f in rec["forwards"]:
        f.pop("mask_rows", None)
    trace, found = analyze(rec, demo.tokenizer)
    got = {f["code"]: f["severity"] for f in found}
    assert got.get("tree_inferred") == "info" and "error" not in got.values(), got
    paths = [len(r.tree["path"]) for r in trace.rounds if r.tree]
    assert paths == [len(r["tree"]["path"]) for r in tree_rounds(res)]


def test_mask_rows_compact_content():
    causal = torch.zeros(1, 1, 3, 5)
    causal[0, 0] = torch.triu(torch.full((3, 5), float("-inf")), diagonal=3)
    assert tree_hooks.mask_rows(causal, 2, 3) is None
    padded = causal.clone()
    padded[..., 0] = float("-inf")                     # a left-padding column: still a chain
    assert tree_hooks.mask_rows(padded, 2, 3) is None
    vis = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 0], [1, 1, 1, 0, 1]], dtype=torch.bool)
    assert tree_hooks.mask_rows(vis[None, None], 2, 3) == {"from": 3, "rows": [[], [3], [4]]}
    assert tree_hooks.is_tree({"position_ids": [5, 6, 6, 7]})
    assert not tree_hooks.is_tree({"position_ids": [5, 6, 7]})              # a chain
    assert not tree_hooks.is_tree({"position_ids": [5, 5, 5]})              # one position
    assert not tree_hooks.is_tree({"position_ids": [5, 7, 7]})              # a gap
    assert not tree_hooks.is_tree({"position_ids": [5, 6, 6], "mrope": [[0]]})


def test_chain_loop_stays_a_chain(demo):
    res = record(demo, "correct", CLIPS[0])
    rec = res["recording"]
    assert rec["draft_shape"] == "chain"
    assert not any(f.get("slot_moves") or f.get("mask_rows") for f in rec["forwards"])
    assert codes(res, "error") == set()
    assert not tree_rounds(res)


def test_inspect_tab_records_a_tree_loop():
    """The Inspect tab loads example decoders by file (no sys.path): the fault loops find the
    correct loop beside them, and the tab's recording gets the same verdicts."""
    from ui.inspect import example_names, record_example

    assert {"tree_correct", "tree_eagle_correct", *FAULTS} <= set(example_names())
    res = record_example("tree_no_compaction", "sad_01")
    assert res["ok"] and "stale_cache" in codes(res), res.get("error")


@pytest.mark.parametrize("clip", CLIPS[:2], ids=lambda c: Path(c).stem)
def test_tree_without_drafting_model(demo, clip):
    """Candidates looked up in the text (no second-model forward, as Medusa's heads): a lookup
    drafter, a tree shape, rounds with their accepted drafts, no error."""
    res = record(demo, "tree_lookup_correct", clip, reference=True)
    assert res["reference"]["matches"]
    assert codes(res, "error") == set(), [f["title"] for f in res["findings"]]
    rec = res["recording"]
    assert rec["drafter"] == "lookup" and rec["draft_shape"] == "tree"
    assert not any(f["model"] == "edge" for f in rec["forwards"])
    assert tree_rounds(res)
    rounds = res["trace"]["rounds"]
    assert sum(r["accepted"] for r in rounds) > 0
    assert all(r["verified"] for r in rounds)


def test_reference_divergence_points_at_the_tree_bug(demo):
    """`record --reference` of a tree loop that leaves the cloud's greedy decode: the first
    divergence is the decoder's, explained by the tree finding (the user row is read through
    the tree's accepted path)."""
    res = record(demo, "tree_linear_positions", CLIPS[0], reference=True)
    fd = res["reference"]["first_divergence"]
    assert fd is not None and fd["cause"] == "decoder" and fd["explained_by"] == "tree_positions"


def test_cross_ranks_are_the_ranks_under_each_row():
    torch.manual_seed(0)
    logits, ids = torch.randn(7, 500), [3, 10, 499, 0, 7, 7, 250]
    got = tree_hooks.cross(logits, ids)
    logp = torch.log_softmax(logits, -1)
    assert got["rank"] == [[int((logp[r] > logp[r, i]).sum()) + 1 for i in ids] for r in range(7)]
    assert got["logp"][2][1] == round(float(logp[2, 10]), 5)
