"""Reconstruction and blind checks on hand-made recordings (no model): each check fires on
the pattern it names and stays silent on the same run done right."""
from __future__ import annotations

import pytest

from specdec_core.recorder import analyze
from specdec_core.recorder.observe.hooks import SCHEMA
from specdec_core.recorder.evidence.tape import RecordingError


def rows(ids, argmax, start_offset):
    """Rows scoring input indices start_offset.. with the given argmax (top-1 prob 0.9)."""
    n = len(argmax)
    nxt = ids[start_offset + 1:]
    return {"offset": start_offset, "vocab": 10, "argmax": list(argmax),
            "top_ids": [[a, (a + 1) % 10, (a + 2) % 10, (a + 3) % 10, (a + 4) % 10] for a in argmax],
            "top_logp": [[-0.1, -3.0, -4.0, -5.0, -6.0]] * n, "entropy": [0.4] * n,
            "next_rank": [1 if x == a else 2 for x, a in zip(nxt, argmax)],
            "next_logp": [-0.1 if x == a else -3.0 for x, a in zip(nxt, argmax)], "fed_next": None}


def fwd(i, model, ids, cache_len, cache, argmax, offset=None, **kw):
    off = len(ids) - len(argmax) if offset is None else offset
    d = {"i": i, "model": model, "ids": ids, "batch": 1, "position_ids": None,
         "cache_position": None, "mask_shape": None, "cache_len": cache_len, "cache": cache,
         "use_cache": True, "inputs_embeds": False, "rows": rows(ids, argmax, off)}
    d.update(kw)
    return d


def recording(forwards, out, **declared):
    return {"schema": SCHEMA, "prompt_ids": [1, 2, 3], "stop_ids": [9], "out_ids": out,
            "declared": {"k": 2, "max_new_tokens": 8, **declared}, "vocab": {"tokenizer": 10},
            "wall_s": 0.01, "forwards": forwards}


def round1():
    """Edge drafts 4, 5 from prompt 1 2 3; the cloud accepts 4, corrects 5 -> 6."""
    return [fwd(0, "edge", [1, 2, 3], 0, 0, [4]),
            fwd(1, "edge", [4], 3, 0, [5]),
            fwd(2, "cloud", [1, 2, 3, 4, 5], 0, 1, [4, 6, 7])]


def round2(edge_cache_len, positions=None):
    """Edge drafts 9 (EOS) after 1 2 3 4 6; the cloud accepts it."""
    return [fwd(3, "edge", [6], edge_cache_len, 0, [9], position_ids=positions),
            fwd(4, "cloud", [6, 9], 4, 1, [9, 9])]


def codes(rec):
    return [f["code"] for f in analyze(rec, None)[1]]


def test_correct_run_reconstructs_rounds_and_sources():
    trace, found = analyze(recording(round1() + round2(4), [4, 6, 9]), None)
    assert found == []
    assert [t.source for t in trace.tokens] == ["accepted", "corrected", "accepted"]
    assert [(r.drafted, r.accepted, r.committed) for r in trace.rounds] == [(2, 1, 2), (1, 1, 1)]
    assert [r.id for r in trace.rejected] == [5] and trace.rejected[0].at == 1
    assert trace.ended_by == "eos" and trace.metrics["cloud_calls"] == 2


def test_uncropped_cache_is_stale_cache():
    fw = round1()
    fw.insert(2, fwd(9, "edge", [5], 4, 0, [8]))        # the edge also took its last draft
    for i, f in enumerate(fw):
        f["i"] = i
    rest = round2(5)                                    # ... and its cache is never cropped
    for i, f in enumerate(rest):
        f["i"] = 4 + i
    found = analyze(recording(fw + rest, [4, 6, 9]), None)[1]
    assert [f["code"] for f in found] == ["stale_cache"]
    ev = found[0]["evidence"]
    assert ev["model"] == "edge" and ev["forward"] == 4 and ev["position"] == 4
    assert ev["tokens"] == {"fed": 5, "committed": 6}


def test_positions_that_do_not_continue_the_cache():
    assert codes(recording(round1() + round2(4, positions=[0]), [4, 6, 9])) == ["position_error"]
    assert codes(recording(round1() + round2(4, positions=[4]), [4, 6, 9])) == []


def test_short_mask_on_an_incremental_step():
    fw = round1() + round2(4)
    fw[3]["mask_shape"] = [1, 1]
    assert codes(recording(fw, [4, 6, 9])) == ["position_error"]


def test_committed_token_the_cloud_did_not_choose_is_a_lossless_violation():
    rec = recording(round1() + round2(4), [4, 5, 9])   # committed the rejected draft 5
    found = analyze(rec, None)[1]
    lv = [f for f in found if f["code"] == "lossless_violation"]
    assert lv and lv[0]["evidence"]["index"] == 1 and lv[0]["evidence"]["tokens"] == {"committed": 5, "cloud": 6}
    assert lv[0]["evidence"]["rank"] == 2
    assert codes(recording(round1() + round2(4), [4, 5, 9], verify="rank")) != codes(rec)


def test_stop_id_inside_the_output_is_missed_eos():
    fw = round1() + round2(4) + [fwd(5, "edge", [9], 5, 0, [4]), fwd(6, "cloud", [4], 6, 1, [4])]
    assert "missed_eos" in codes(recording(fw, [4, 6, 9, 4]))


def test_tokens_the_cloud_never_scored_end_the_run_unverified():
    fw = round1() + [fwd(3, "edge", [6], 4, 0, [7])]
    found = analyze(recording(fw, [4, 6, 7]), None)[1]
    assert [f["code"] for f in found] == ["unverified_end"]
    assert found[0]["evidence"]["unverified"] == 1


def test_draft_that_is_not_the_edge_argmax_is_hidden_processing():
    fw = round1()
    fw[0]["rows"] = rows([1, 2, 3], [7], 2)            # edge's own argmax was 7, it drafted 4
    assert "hidden_draft_processing" in codes(recording(fw + round2(4), [4, 6, 9]))


def test_more_than_k_drafts_is_off_by_one():
    rec = recording(round1() + round2(4), [4, 6, 9], k=1)
    assert "off_by_one" in codes(rec)


def _widths(fw, edge, cloud):
    for f in fw:
        f["rows"]["vocab"] = edge if f["model"] == "edge" else cloud
    return fw


def test_heads_wider_than_the_tokenizer_or_each_other_are_only_info():
    for edge, cloud in ((12, 12), (12, 14), (10, 12)):
        found = analyze(recording(_widths(round1() + round2(4), edge, cloud), [4, 6, 9]), None)[1]
        assert [(f["code"], f["severity"]) for f in found] == [("vocab_widths", "info")], found


def test_vocab_mismatch_is_an_error_only_for_what_shows_a_bug_and_says_which():
    # (b) an output id only the wider (cloud) head has: logits compared at different widths
    fw = _widths(round1() + round2(4), 12, 14)
    fw[2]["rows"]["argmax"][1] = 12
    found = analyze(recording(fw, [4, 12, 9]), None)[1]
    f = next(f for f in found if f["code"] == "vocab_mismatch")
    assert f["severity"] == "error" and "different widths" in f["title"] and "cloud" in f["title"]
    assert f["evidence"]["tokens"] == [12] and f["evidence"]["index"] == 1
    # (a) same widths, an output id past the tokenizer: picked from padding rows
    fw = _widths(round1() + round2(4), 12, 12)
    fw[2]["rows"]["argmax"][1] = 11
    f = next(f for f in analyze(recording(fw, [4, 11, 9]), None)[1] if f["code"] == "vocab_mismatch")
    assert f["severity"] == "error" and "outside the tokenizer" in f["title"]


def mrope_recording(edge_positions, delta):
    """round1 + round2 of a 3-token prompt placed at 0, 0, 1 (a prompt whose positions end
    below its length: rope delta = 2 - 3 = -1 when delta is -1) with three mrope rows."""
    prompt_rows = [[0, 1, 2 + delta]] * 3 if delta else [[0, 1, 2]] * 3
    fw = round1() + round2(4)
    for f in fw:
        n, L = len(f["ids"]), f["cache_len"]
        f["mrope"] = [[(j if j < 2 else j + delta) for j in range(L, L + n)]] * 3
    fw[3]["mrope"] = [edge_positions] * 3
    rec = recording(fw, [4, 6, 9])
    rec["mrope"] = {"prompt": prompt_rows, "rope_delta": delta}
    return rec


def test_mrope_positions_continue_cache_len_plus_rope_delta():
    assert codes(mrope_recording([4 - 1], -1)) == []            # edge forward 3 at cache 4
    assert codes(mrope_recording([4], 0)) == []


@pytest.mark.parametrize("got, delta, words", [([0], 0, "restarted at 0"), ([4], -1, "rope delta (-1) was dropped"),
                                               ([-1], -1, "restarted at -1")])
def test_mrope_reset_or_dropped_delta_is_a_position_error_naming_forward_and_delta(got, delta, words):
    found = analyze(mrope_recording(got, delta), None)[1]
    f = next(f for f in found if f["code"] == "position_error")
    assert words in f["cause"], f["cause"]
    assert f["evidence"]["forward"] == 3 and f["evidence"]["rope_delta"] == delta
    assert "forward 3" in f["detail"] and f"rope delta {delta}" in f["detail"]


def test_not_a_recording_is_a_one_line_user_error():
    with pytest.raises(RecordingError, match="not a SpecScope recording"):
        analyze({"schema": "other"}, None)


def test_declared_processing_is_generates_own_per_row():
    """processing.apply: row r is what generate's penalty, temperature, top-k and top-p (in that
    order) make of it given the context up to its input token; removed tokens sit far below."""
    import torch
    from transformers import (LogitsProcessorList, RepetitionPenaltyLogitsProcessor,
                              TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper)

    from specdec_core.recorder.observe import processing

    x = torch.randn(3, 12, generator=torch.Generator().manual_seed(0)) * 3
    ctx, first, T = [4, 7, 4, 1, 9], 2, 0.7
    got = processing.apply(x, {"penalty": 1.3, "top_k": 5, "top_p": 0.8}, T, ctx, first)
    hf = LogitsProcessorList([RepetitionPenaltyLogitsProcessor(1.3), TemperatureLogitsWarper(T),
                              TopKLogitsWarper(5), TopPLogitsWarper(0.8)])
    for r in range(3):
        want = hf(torch.tensor([ctx[:first + r + 1]]), x[r:r + 1].clone())[0]
        kept = torch.isfinite(want)
        assert torch.equal(got[r] > got[r].min(), kept) and kept.sum() >= 1
        assert torch.allclose(got[r][kept] / T, want[kept])
    # greedy: the penalty alone, the row's argmax is the penalised one
    pen = processing.apply(x, {"penalty": 1.3}, 0, ctx, first)
    assert torch.equal(pen[0].argmax(), hf[0](torch.tensor([ctx[:3]]), x[:1].clone())[0].argmax())
