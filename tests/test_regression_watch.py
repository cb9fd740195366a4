"""Regression watch and the label matrix (issue 28): `batch ... --baseline DIR
[--fail-on-regression]` and results.json["by_label"], through the real CLI on real clips."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from components.batch_view import label_matrix_html
from specdec_core.cli import main
from specdec_core.evaluation.batch import watch

ROOT = Path(__file__).resolve().parents[1]
CLIPS = ("neutral_03", "happy_03")       # concise: short decodes


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    d = tmp_path_factory.mktemp("watch")
    lines = ["name,path,label,prompt_type,reference"]
    lines += [f"{c},{ROOT / 'sample_audio' / c}.wav,{c.split('_')[0]},concise," for c in CLIPS]
    (d / "m.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return d


def _batch(manifest, out, *extra) -> tuple[int, dict]:
    # time_limit_s=0: a loaded CI machine must not cut a decode short (that changes the output)
    rc = main(["batch", str(manifest / "m.csv"), "--out", str(manifest / out),
               "--set", "time_limit_s=0", *extra])
    return rc, json.loads((manifest / out / "results.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def first(manifest):
    rc, res = _batch(manifest, "first")
    assert rc == 0
    return res


def test_label_matrix(first):
    table = first["by_label"]
    assert set(table) == {"neutral", "happy"}
    assert table["happy"]["configs"]["A"] == {k: v for k, v in table["happy"].items() if k != "configs"}
    cols = table["happy"]["configs"]["A"]
    assert set(cols) == {"clips", "drafts", "acceptance_rate", "judged", "judged_acceptance_rate",
                         "audio_judged", "other_judged", "audio_acceptance_rate", "other_acceptance_rate",
                         "mean_accepted_length", "cloud_calls_per_token"}
    # the whole of the two halves divides by the same judged drafts, so it lies between them
    halves = [cols[k] for k in ("audio_acceptance_rate", "other_acceptance_rate") if cols[k] is not None]
    assert min(halves) - 1e-4 <= cols["judged_acceptance_rate"] <= max(halves) + 1e-4, cols
    assert cols["judged"] == cols["audio_judged"] + cols["other_judged"] <= cols["drafts"]
    row = next(r for r in first["rows"] if r["name"] == "happy_03")
    m = row["metrics"]
    assert cols["clips"] == 1 and cols["acceptance_rate"] == pytest.approx(m["acceptance_rate"], abs=1e-3)
    assert cols["cloud_calls_per_token"] == pytest.approx(m["cloud_calls"] / m["new_tokens"], abs=1e-3)
    split = m["acceptance_by_dependence"]
    if split["audio"]["judged"]:
        assert cols["audio_acceptance_rate"] == split["audio"]["acceptance_rate"]
    html = label_matrix_html(table)
    assert "happy" in html and 'title="draft acceptance rate (%)' in html


def test_baseline_against_itself_lists_no_regression(manifest, first, capsys):
    rc, res = _batch(manifest, "again", "--baseline", str(manifest / "first"), "--fail-on-regression")
    b = res["baseline"]
    assert rc == 0, b["regressions"]
    assert b["regressions"] == [] and b["changed_rows"] == 0 and len(b["rows"]) == 2
    assert all(r["first_divergence"] is None and r["acceptance_delta"] == 0 for r in b["rows"])
    assert b["speed"]["rows"] == 2 and b["speed"]["band"] == watch.SPEED_BAND
    assert "0 regression(s)" in capsys.readouterr().out


def test_baseline_against_a_lossy_configuration_lists_the_changed_rows(manifest, first, capsys):
    rc, res = _batch(manifest, "lossy", "--fault", "lenient_rank", "--baseline", str(manifest / "first"),
                     "--fail-on-regression")
    b = res["baseline"]
    assert rc == 1
    changed = [r for r in b["rows"] if r["tokens_changed"]]
    assert changed and b["changed_rows"] == len(changed)
    assert all(isinstance(r["first_divergence"], int) for r in changed)
    whats = {(r["name"], r["what"]) for r in b["regressions"]}
    assert {(r["name"], "token_ids") for r in changed} <= whats
    assert any(r["what"] == "findings" and "lossless_violation" in r["detail"] for r in b["regressions"])
    assert "REGRESSION" in capsys.readouterr().out


def test_fail_on_regression_needs_a_baseline(manifest):
    assert main(["batch", str(manifest / "m.csv"), "--out", str(manifest / "x"),
                 "--fail-on-regression"]) == 2


def test_speed_noise_is_not_a_regression_but_a_slower_decoder_is(first):
    rows = first["rows"]
    # the whole machine twice as slow: half the tokens/s, every forward twice as long
    slow = copy.deepcopy(rows)
    for r in slow:
        m = r["metrics"]
        m["tokens_per_s"] /= 2
        m["time_split"] = {k: v * 2 if isinstance(v, float) else v for k, v in m["time_split"].items()}
    b = watch.compare(slow, rows)
    assert b["speed"]["ratio"] == pytest.approx(0.5, abs=0.01) and b["speed"]["adjusted"] == pytest.approx(1.0, abs=0.01)
    assert b["regressions"] == []
    # the decoder itself twice as slow (same forward times, twice the wall time): a regression
    worse = copy.deepcopy(rows)
    for r in worse:
        r["metrics"]["tokens_per_s"] /= 2
    b = watch.compare(worse, rows)
    assert [r["what"] for r in b["regressions"]] == ["speed"]
    # within the band: not a regression
    near = copy.deepcopy(rows)
    for r in near:
        r["metrics"]["tokens_per_s"] *= 0.85
    assert watch.compare(near, rows)["regressions"] == []


def test_first_divergence_and_missing_rows(first):
    assert watch.first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert watch.first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert watch.first_divergence([1, 2], [1, 2, 3]) == 2
    rows = first["rows"]
    b = watch.compare(rows[:1], rows)
    assert b["missing_now"] == [rows[1]["name"]] and b["regressions"] == []
    failed = copy.deepcopy(rows)
    failed[0].update(ok=False, error="boom")
    assert [r["what"] for r in watch.compare(failed, rows)["regressions"]] == ["failed"]


def test_bad_baseline_folder_is_one_line(manifest, tmp_path, capsys):
    rc = main(["batch", str(manifest / "m.csv"), "--out", str(tmp_path / "o"), "--baseline", str(tmp_path)])
    assert rc == 2
    err = capsys.readouterr().err
    assert "no results.json" in err and "Traceback" not in err


def test_a_killed_batch_is_a_baseline_of_its_finished_rows(manifest, tmp_path):
    """A baseline folder holding only results.jsonl (the batch was killed, its last line cut
    short by the kill) reads as --resume reads it: the finished rows, the cut line skipped."""
    text = (manifest / "first" / "results.jsonl").read_text(encoding="utf-8")
    assert len(text.splitlines()) == len(CLIPS)
    (tmp_path / "results.jsonl").write_text(text + text.splitlines()[0][:40], encoding="utf-8")
    rows = watch.load_rows(tmp_path)
    assert [r["name"] for r in rows] == list(CLIPS) and all(r["ok"] for r in rows)


def test_docs_metrics_carries_the_glossary():
    from specdec_core.analysis.glossary import markdown_table

    doc = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    body = doc.split("<!-- glossary:start -->\n")[1].split("\n<!-- glossary:end -->")[0]
    assert body == markdown_table()
