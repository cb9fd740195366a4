"""Normalizers on hand-made recordings (no model): the one rewrite of a layout (`shift.move`,
EAGLE's shift and a sliding window) and a generating verifier's merge leave the recording they
were given as it was (issue 47: the normalize stage returns a new canonical recording)."""
from __future__ import annotations

import copy

from specdec_core.recorder.normalize import generated, shift, window
from test_recorder_unit import fwd, recording


def test_move_rewrites_a_first_and_a_later_forward_and_keeps_the_fed_values():
    C = [10, 11, 12, 13, 14, 15, 16]
    first = fwd(0, "edge", [13, 14], 0, 0, [15], position_ids=[0, 1], mask_shape=[1, 2],
                mask_rows={"from": 0, "rows": [[0], [0, 1]]})
    shift.move(first, 3, C)
    assert first["ids"] == [10, 11, 12, 13, 14] and first["position_ids"] == [0, 1, 2, 3, 4]
    assert first["rows"]["offset"] == 1 + 3 and first["mask_shape"] == [1, 5]
    assert first["mask_rows"] == {"from": 3, "rows": [[3], [3, 4]]}
    assert first["raw"]["ids"] == [13, 14] and first["raw"]["rows"]["offset"] == 1
    later = fwd(1, "edge", [15], 2, 0, [16], position_ids=[2], slot_moves=[[1, 0], [0, -1]])
    shift.move(later, 3, C)
    assert later["cache_len"] == 5 and later["position_ids"] == [5] and later["ids"] == [15]
    assert later["slot_moves"] == [[4, 3], [3, -1]] and later["raw"]["cache_len"] == 2
    absolute = fwd(2, "edge", [16], 2, 1, [16], position_ids=[5])
    shift.move(absolute, 3, C, absolute=True)           # positions already the text's own
    assert absolute["position_ids"] == [5] and absolute["cache_len"] == 5


def test_a_window_drafter_reads_as_the_committed_text_and_the_input_is_untouched():
    prompt, out = [1, 2, 3], [4, 5, 6]
    fw = [fwd(0, "edge", [2, 3], 0, 0, [4], position_ids=[0, 1]),         # the last 2 ids
          fwd(1, "cloud", [1, 2, 3, 4], 0, 1, [4, 5], offset=2)]
    rec = dict(recording(fw, out), prompt_ids=prompt)
    before = copy.deepcopy(rec)
    canon, notes = window.normalize(rec)
    assert rec == before and notes == {"window": {"forwards": 1}}
    edge = canon["forwards"][0]
    assert edge["ids"] == [1, 2, 3] and edge["position_ids"] == [0, 1, 2] and edge["raw"]["ids"] == [2, 3]


def test_a_generating_verifier_is_merged_without_writing_the_recording_it_was_given():
    """The edge forward before the cloud's one-token forwards names the next draft's forward in
    its fed_next: renumbered in the canonical recording, never in the given one."""
    fed = lambda i, tok: {"forward": i, "token": tok, "rank": 1, "logp": -0.1}   # noqa: E731
    e0 = fwd(0, "edge", [1, 2, 3], 0, 0, [4])
    e0["rows"]["fed_next"] = fed(4, 4)
    c0 = fwd(1, "cloud", [1, 2, 3], 0, 1, [4])
    c0["rows"]["fed_next"] = fed(2, 4)
    c1 = fwd(2, "cloud", [4], 3, 1, [5])
    c1["rows"]["fed_next"] = fed(3, 5)
    c2 = fwd(3, "cloud", [5], 4, 1, [6])
    e1 = fwd(4, "edge", [4], 3, 0, [5])
    rec = recording([e0, c0, c1, c2, e1], [4, 5, 6])
    before = copy.deepcopy(rec)
    canon, notes = generated.normalize(rec)
    assert notes["generated"]["rounds"] == 1 and rec == before
    assert [f["i"] for f in canon["forwards"]] == list(range(len(canon["forwards"])))
    assert canon["forwards"][0]["rows"]["fed_next"]["forward"] == len(canon["forwards"]) - 1
