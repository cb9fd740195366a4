"""recorder/normalize/validate.py (issue 36): the one size / consistency check of a recording, with its
limits from the environment, used by analyze() and the Inspect upload."""
import json

import pytest

from specdec_core.recorder.normalize import validate
from specdec_core.recorder.normalize.validate import RecordingRefused, check_recording, parse_json
from test_recorder_unit import recording, round1


def test_a_real_shaped_recording_passes():
    check_recording(recording(round1(), [4, 6]))


def test_pasted_forwards_are_malformed_and_analyze_refuses_them():
    from specdec_core.recorder import analyze
    rec = recording(round1() * 3, [4, 6])
    with pytest.raises(RecordingRefused, match="forward 3 says it is forward 0"):
        check_recording(rec)
    with pytest.raises(RecordingRefused, match="malformed"):
        analyze(rec, None)


@pytest.mark.parametrize("bad, why", [
    ({"schema": "x", "forwards": []}, "not a SpecScope recording"),
    ({"forwards": ["x"]}, "forward 0 is not an object"),
    ({"forwards": [{"i": 0, "model": "gpu"}]}, "model 'gpu'"),
    ({"forwards": [{"i": 0, "model": "edge", "ids": [1, "2"]}]}, "not token ids"),
    ({"forwards": [{"i": 0, "model": "edge", "cache_len": -1}]}, "cache_len -1"),
    ({"forwards": [], "out_ids": {"a": 1}}, "out_ids are not token ids"),
])
def test_shapes_are_refused_with_their_reason(bad, why):
    rec = {"schema": "specscope.recording/1", **bad}
    with pytest.raises(RecordingRefused, match=why):
        check_recording(rec)


def test_limits_come_from_the_environment(monkeypatch):
    rec = recording(round1(), [4, 6])
    monkeypatch.setenv("SPECSCOPE_MAX_RECORDING_FORWARDS", "2")
    with pytest.raises(RecordingRefused, match=r"3 forwards \(the limit is 2\)"):
        check_recording(rec)
    monkeypatch.setenv("SPECSCOPE_MAX_RECORDING_FORWARDS", "100")
    monkeypatch.setenv("SPECSCOPE_MAX_RECORDING_IDS", "10")
    with pytest.raises(RecordingRefused, match="more than 10 token ids"):
        check_recording(rec)
    monkeypatch.setenv("SPECSCOPE_MAX_RECORDING_MB", "0.001")
    with pytest.raises(RecordingRefused, match=r"too large: 0\.0 MB \(the limit is 0\.001 MB\)"):
        parse_json(json.dumps(rec) + " " * 2000)
    assert validate.max_mb() == 0.001


def test_nesting_and_non_json_get_one_line():
    with pytest.raises(RecordingRefused, match="nested too deeply"):
        parse_json("[" * 100_000 + "]" * 100_000)
    with pytest.raises(RecordingRefused, match="not a JSON file"):
        parse_json("hello")


def test_field_shapes_take_plain_numbers_fast_and_judge_any_other_type_one_by_one():
    # validate._all: plain int/float/None lists pass in one C-level pass; a bool is never a
    # number, a numpy scalar is judged as isinstance judges it (an in-process recording)
    import numpy as np

    from specdec_core.recorder.normalize.validate import _int_list, _num_rows, _nums_or_null

    assert _int_list([1, 2]) and _int_list([]) and _int_list([np.int64(3)]) is isinstance(np.int64(3), int)
    assert not _int_list([1, True]) and not _int_list([1, 2.0]) and not _int_list("ab")
    assert _num_rows([[1, 2.5], [3]]) and _num_rows([[np.float64(1.0)]])
    assert not _num_rows([[1, True]]) and not _num_rows([1]) and not _num_rows([[None]])
    assert _nums_or_null([None, 1.5, 2]) and _nums_or_null([])
    assert not _nums_or_null([True]) and not _nums_or_null(["a"])
