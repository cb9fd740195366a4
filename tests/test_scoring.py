"""Reference scoring and the checklist on hand-made cases."""
import pytest

from specdec_core.evaluation.batch.checklist import checklist, premature_stop
from specdec_core.evaluation.batch.scoring import (chrf, emotion_hit, emotion_of_text, per_label_accuracy, score_text,
                                  weighted_f1)

REF = "说话人音调很高且起伏剧烈，音量很大，语速很快，情绪愤怒。"


# --- chrF ------------------------------------------------------------------------------------

def test_chrf_identical_is_100_and_disjoint_is_0():
    assert chrf(REF, REF) == pytest.approx(100.0)
    assert chrf("猫狗鸟鱼虫", "说话人语速") == pytest.approx(0.0)
    assert chrf("", REF) == 0.0 and chrf(REF, "") == 0.0


def test_chrf_ignores_spaces_in_chinese_and_orders_by_closeness():
    assert chrf(" ".join(REF), REF) == pytest.approx(100.0)
    close = "说话人音调很高且起伏剧烈，音量很大，情绪生气。"
    far = "声音低沉，停顿很多，情绪悲伤。"
    assert 0 < chrf(far, REF) < chrf(close, REF) < 100


# --- emotion ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text,label", [
    ("语速很快，情绪愤怒，并不开心。", "angry"),          # first named wins
    ("显得很高兴，但也有些担忧。", "happy"),
    ("音调突升，让人吃惊。", "surprise"),                 # a second word of the label
    ("声音低沉，情绪难过。", "sad"),
    ("整体情绪平静。", "neutral"),
    ("说话人语速较快，音调偏高。", None),                 # no emotion named
    ("", None),
])
def test_emotion_of_text(text, label):
    assert emotion_of_text(text) == label


def test_emotion_hit_and_score_text():
    assert emotion_hit("情绪焦虑。", "worried") is True
    assert emotion_hit("情绪焦虑。", "sad") is False
    assert emotion_hit("情绪焦虑。", None) is None
    s = score_text(REF, REF, "angry")
    assert s == {"chrf": 100.0, "emotion": "angry", "emotion_hit": True}
    assert score_text("情绪悲伤", "", None) == {"chrf": None, "emotion": "sad", "emotion_hit": None}


# --- per-label accuracy and weighted F1 -------------------------------------------------------

def test_weighted_f1_small_confusion_by_hand():
    labels = ["angry", "angry", "angry", "happy", "happy", "sad"]
    preds = ["angry", "angry", "happy", "happy", None, "angry"]
    # angry: tp 2, fp 1 (the sad clip), fn 1 -> P 2/3, R 2/3, F1 2/3, support 3
    # happy: tp 1, fp 1 (an angry clip), fn 1 (None) -> P 1/2, R 1/2, F1 1/2, support 2
    # sad:   tp 0 -> F1 0, support 1
    # weighted = (3 * 2/3 + 2 * 1/2 + 1 * 0) / 6 = 3/6 = 0.5
    assert weighted_f1(labels, preds) == pytest.approx(0.5)
    assert per_label_accuracy(labels, preds) == pytest.approx({"angry": 2 / 3, "happy": 0.5, "sad": 0.0})
    assert list(per_label_accuracy(labels, preds)) == ["angry", "happy", "sad"]  # LABELS order


def test_weighted_f1_edges():
    assert weighted_f1(["sad", "happy"], ["sad", "happy"]) == pytest.approx(1.0)
    assert weighted_f1(["sad", "happy"], [None, None]) == 0.0          # naming nothing is wrong
    # unlabeled clips are not scored; with no label at all there is nothing to score
    assert weighted_f1(["sad", None, ""], ["sad", "angry", "happy"]) == pytest.approx(1.0)
    assert weighted_f1([None], ["sad"]) is None
    # a class that is only predicted adds false positives to nobody's support but costs recall
    assert weighted_f1(["sad", "sad"], ["sad", "angry"]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError):
        weighted_f1(["sad"], [])


# --- checklist -------------------------------------------------------------------------------

def good_row(**m):
    metrics = {"ended_by": "sentence", "new_tokens": 40, "template_leak": False, "mean_accepted_length": 3.5,
               "hanzi_count": 40, "punct_density": 0.15, "repeat_rate": 0.02, "adjacent_repeats": 0,
               "acceptance_rate": 0.8, "cloud_call_rate": 1.0, "cloud_calls": 10}
    metrics.update(m)
    return {"ok": True, "prompt_type": "detailed", "metrics": metrics}


def by_name(items):
    return {it["name"]: it for it in items}


def test_checklist_all_good_passes_every_graded_item():
    items = checklist([good_row() for _ in range(5)])
    for it in items:
        assert set(it) == {"name", "passed", "value", "target"}
        assert isinstance(it["value"], str) and isinstance(it["target"], str)
    graded = [it for it in items if it["passed"] is not None]
    assert len(graded) == 8 and all(it["passed"] for it in graded)
    d = by_name(items)
    assert d["cloud call rate"]["passed"] is None and "100.0% of rounds" in d["cloud call rate"]["value"]
    assert d["median accepted span"]["value"] == "3.50 tokens"


@pytest.mark.parametrize("bad,item", [
    ({"ended_by": "fault", "new_tokens": 5}, "no premature stops"),
    ({"ended_by": "max_tokens", "new_tokens": 128}, "no premature stops"),
    ({"template_leak": True}, "no template leakage"),
    ({"punct_density": 0.5}, "punctuation density"),      # one flood fails even with a fine median
])
def test_checklist_one_bad_clip_fails_its_item(bad, item):
    rows = [good_row() for _ in range(4)] + [good_row(**bad)]
    d = by_name(checklist(rows))
    assert d[item]["passed"] is False
    assert d[item]["value"].startswith(("1 of 5", "median")), d[item]["value"]
    others = [it for it in d.values() if it["name"] != item and it["passed"] is not None]
    assert all(it["passed"] for it in others)


def test_checklist_medians_means_and_bands():
    # spans: median of 2, 2, 5 = 2 < 3
    d = by_name(checklist([good_row(mean_accepted_length=v) for v in (2, 2, 5)]))
    assert d["median accepted span"]["passed"] is False and d["median accepted span"]["value"] == "2.00 tokens"
    # acceptance exactly 0.6 is not > 0.6
    assert by_name(checklist([good_row(acceptance_rate=0.6)]))["acceptance rate"]["passed"] is False
    # adjacent repeats: mean 1/4 = 0.25 > 0.2; repeat rate median 0.3 > 0.1
    d = by_name(checklist([good_row(adjacent_repeats=a, repeat_rate=0.3) for a in (1, 0, 0, 0)]))
    assert d["adjacent repeats near zero"]["passed"] is False and d["repeat rate low"]["passed"] is False
    # bands follow each row's prompt type: 12 hanzi is in band for concise, out for detailed
    concise = {**good_row(hanzi_count=12), "prompt_type": "concise"}
    d = by_name(checklist([concise] * 4 + [good_row()]))
    assert d["length within band"]["passed"] is True and "5 of 5" in d["length within band"]["value"]
    d = by_name(checklist([good_row(hanzi_count=12)] * 2 + [good_row()] * 3))   # 3/5 = 60% < 80%
    assert d["length within band"]["passed"] is False and "3 of 5" in d["length within band"]["value"]


def test_checklist_uses_ok_rows_only_and_handles_none():
    failed = {"ok": False, "error": "audio file not found: x.wav", "metrics": {}}
    d = by_name(checklist([good_row(), failed]))
    assert d["clips decoded"]["value"] == "1 of 2"
    assert all(it["passed"] is not False for it in d.values())
    empty = checklist([failed])
    assert all(it["passed"] is None for it in empty)
    # no verified rounds at all (entropy gate never fired): reported, not failed
    d = by_name(checklist([good_row(mean_accepted_length=None, acceptance_rate=None)]))
    assert d["median accepted span"]["passed"] is None and d["acceptance rate"]["passed"] is None


def test_premature_stop_rule():
    assert premature_stop({"ended_by": "fault", "new_tokens": 50}, 16)
    assert premature_stop({"ended_by": "cycle", "new_tokens": 50}, 16)
    assert premature_stop({"ended_by": "cancelled", "new_tokens": 3}, 16)
    assert not premature_stop({"ended_by": "cancelled", "new_tokens": 30}, 16)
    assert not premature_stop({"ended_by": "eos", "new_tokens": 9}, 16)   # the model's own end
    assert not premature_stop({"ended_by": "sentence", "new_tokens": 16}, 16)


def test_looping_clips_fail_the_repeat_check_and_counts_head_their_lines(tmp_path):
    """Issue 50 (5): an edge-only batch printed 'acc None' and '[PASS] repeat rate low (median
    0.5%)' while two clips looped, under '6 of 6 checks passed' heading 10 lines."""
    import io

    from components.batch_view import checklist_html
    from specdec_core.cli.progress import RowProgress
    from specdec_core.evaluation.batch.checklist import checklist_head

    edge_only = dict(acceptance_rate=None, mean_accepted_length=None, cloud_calls=0, cloud_call_rate=0.0,
                     repeat_rate=0.005)
    rows = [good_row(**edge_only, cycles=c) for c in (2, 1, 0, 0, 0)]
    items = checklist(rows)
    rep = by_name(items)["repeat rate low"]
    assert rep["passed"] is False and "2 of 5 clips loop" in rep["value"], rep
    graded = [it for it in items if it["passed"] is not None]
    head = checklist_head(items)
    assert head.startswith(f"{sum(it['passed'] for it in graded)} of {len(graded)} checks passed")
    assert f"{len(items) - len(graded)} reported only" in head and head in checklist_html(items)
    out = io.StringIO()
    bar = RowProgress(tmp_path, file=out)
    bar({"type": "row", "done": 1, "total": 5, "failed": 0, "row": {"ok": True, "config": "A", "name": "sad_01",
                                                     "text": "说话人", "metrics": rows[0]["metrics"]}})
    line = out.getvalue()
    assert "None" not in line and "not checked by the cloud" in line and "loops (2 cycle(s))" in line, line
