"""Inspect tab pieces on a real recording (the demo pair, a sample clip, example decoders):
the pure renderers, the upload parser's one-line refusals, and the /record endpoint through
gradio_client on the real app."""
import json
from pathlib import Path

import pytest

from components.findings import config_badges, findings_html
from components.inspect_view import round_choices, round_html, split_rounds
from specdec_core.errors import UserError

ROOT = Path(__file__).resolve().parents[1]

@pytest.fixture(scope="module")
def recorded():
    from ui.inspect import record_example

    return {name: record_example(name, "angry_01", max_new_tokens=24)
            for name in ("correct", "no_resync")}


def test_findings_cards_show_code_severity_cause_fix_and_evidence(recorded):
    res = recorded["no_resync"]
    assert any(f["severity"] == "error" for f in res["findings"])
    html = findings_html(res["findings"])
    for f in res["findings"]:
        assert f'data-code="{f["code"]}"' in html
    assert "Likely cause:" in html and "Fix:" in html and "evidence:" in html
    # errors come first
    assert html.index('data-severity="error"') < max(html.find('data-severity="warning"'), 0) or \
        'data-severity="warning"' not in html
    assert "No findings" in findings_html([])


def test_correct_decoder_has_no_error_finding(recorded):
    res = recorded["correct"]
    assert res["ok"] and not [f for f in res["findings"] if f["severity"] == "error"]


def test_round_drilldown_shows_caches_positions_and_top5(recorded):
    rec = recorded["correct"]["recording"]
    groups = split_rounds(rec)
    assert len(round_choices(rec)) == len(groups) >= 2
    html = round_html(rec, 2, lambda i: f"<{i}>")
    assert 'data-round="2"' in html and "cache before" in html and "cache after" in html
    assert "position_ids" in html and "edge top-5" in html and "cloud rank of draft" in html
    # round 2 starts from the committed length: the cloud's cache grew by what round 1 kept
    first_cloud = [f for f in groups[1] if f["model"] == "cloud"][0]
    assert str(first_cloud["cache_len"]) in html
    # no_resync: the drill-down shows the edge cache NOT cropped (no "cropped from")
    bad = recorded["no_resync"]["recording"]
    assert "cropped from" not in round_html(bad, 3) and "cropped from" in "".join(
        round_html(rec, n) for n in range(2, len(groups) + 1))
    assert "No recording" in round_html(None, 1)


def test_config_badges_show_declared_knobs_and_faults():
    html = config_badges({"recorded": True, "declared": {"k": 4, "verify": "greedy"}})
    assert "recorded run" in html and "draft length k: 4" in html and "acceptance rule: greedy" in html
    assert "max new tokens: 128" in config_badges({"declared": {"max_new_tokens": 128}})   # no snake_case
    assert "fault: no resync" in config_badges({"k": 4, "faults": ["no_resync"]})      # words (issue 37)


@pytest.mark.parametrize("raw, words", [
    ("this is not json", "not a JSON file"),
    ('{"hello": 1}', "not a SpecScope recording"),
    ('[1, 2, 3]', "not a SpecScope recording"),
])
def test_bad_uploads_get_one_line(raw, words):
    from ui.inspect import parse_recording

    with pytest.raises(UserError) as e:
        parse_recording(raw)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_upload_of_cli_output_or_bare_recording_analyzes(recorded):
    from ui.inspect import analyze_upload

    rec = recorded["no_resync"]["recording"]
    for raw in (json.dumps(rec), json.dumps({"backend": "demo", "results": [{"recording": rec}]})):
        res = analyze_upload(raw)
        assert {f["code"] for f in res["findings"]} == {f["code"] for f in recorded["no_resync"]["findings"]}


@pytest.mark.slow
def test_record_endpoint_through_gradio_client():
    from gradio_client import Client

    from browser_util import app_server

    with app_server() as url:
        client = Client(url, verbose=False)
        res = client.predict("no_resync", "sad_01", api_name="/record")
        assert res["ok"] and any(f["severity"] == "error" for f in res["findings"])
        assert res["recording"]["schema"].startswith("specscope.recording/")
        with pytest.raises(Exception) as e:
            client.predict("no_such_decoder", "sad_01", api_name="/record")
        assert "unknown example decoder" in str(e.value)
        head = client.predict("head_stale_features", "sad_01", api_name="/record")   # issue 35
        assert head["ok"] and "stale_features" in {f["code"] for f in head["findings"]}


def test_pooled_view_pools_findings_and_per_position_acceptance(recorded):
    """Two real recordings pooled: one row each, and the per-position acceptance computed over
    the union of their verified rounds (checked against a count made here from the rounds)."""
    from components.inspect_view import pooled_findings_html, pooled_html, pooled_trace
    from components.plots import position_acceptance
    from ui.inspect import analyze_pool

    files = [(name, json.dumps(recorded[name]["recording"])) for name in ("correct", "no_resync")]
    entries, pooled = analyze_pool(files)
    assert [e["label"] for e in entries] == ["correct", "no_resync"]
    traces = [e["trace"] for e in entries]
    pt = pooled_trace(traces)
    rows = position_acceptance(pt)
    verified = [r for tr in traces for r in tr["rounds"] if r["verified"]]
    assert rows and rows[0][2] == sum(r["drafted"] >= 1 for r in verified)
    assert rows[0][1] == pytest.approx(sum(r["accepted"] >= 1 for r in verified) / rows[0][2])
    html = pooled_html(entries)
    assert 'data-pooled="2"' in html and f"<b>{100 * rows[0][1]:.1f}%</b><small> of {rows[0][2]}" in html and 'data-label="no_resync"' in html
    assert "stale_cache" in html or "context_mismatch" in html     # no_resync's own errors
    assert f"{len(verified)} verified rounds" in html
    acc = entries[0]["trace"]["metrics"]["acceptance_rate"]      # written as the Live card writes it
    assert f'<td class="ss-num">{100 * acc:.1f}%</td>' in html
    assert isinstance(pooled, list)
    fh = pooled_findings_html(pooled, 2)
    assert ("data-pooled-clean" in fh) == (not pooled)
    assert "two or more" in pooled_findings_html([], 1)
    assert "Upload two or more" in pooled_html([])


def test_pooled_findings_of_a_cli_output_match_the_cli(recorded):
    """A record CLI output with several results pools all of them, with the CLI's own function."""
    from specdec_core.recorder.driver.clip import pooled_findings
    from ui.inspect import analyze_pool

    results = [{"audio": f"clip{i}.wav", "ok": True, "recording": recorded[n]["recording"]}
               for i, n in enumerate(("correct", "no_resync", "correct"))]
    entries, pooled = analyze_pool([("run", json.dumps({"backend": "demo", "results": results}))])
    assert [e["label"] for e in entries] == ["run: clip0", "run: clip1", "run: clip2"]
    assert pooled == pooled_findings(results)


def test_omni_recording_drilldown_shows_audio_span_and_rope_delta(recorded):
    from components.inspect_view import audio_html

    rec = dict(recorded["correct"]["recording"], audio={"span": [3, 41], "rope_delta": -25})
    html = round_html(rec, 1)
    assert 'data-audio="1"' in html and "3..41" in html and "38 positions" in html
    assert "rope delta -25" in html
    assert audio_html(recorded["correct"]["recording"]) == ""
    assert audio_html(dict(rec, audio=None)) == "" and 'data-audio' not in round_html(
        recorded["correct"]["recording"], 1)


@pytest.mark.parametrize("mutate, words", [
    (lambda r: r.pop("out_ids"), "missing 'out_ids'"),
    (lambda r: r.pop("prompt_ids"), "missing 'prompt_ids'"),
    (lambda r: r.update(declared="k=4"), "'declared' is a text, not an object"),
    (lambda r: r["forwards"][1].update(position_ids=7), "forward 1's 'position_ids' is a number"),
    (lambda r: r["forwards"][1].update(rows="x"), "forward 1's 'rows' is a text, not an object"),
    (lambda r: r["forwards"][1]["rows"].pop("argmax"), "forward 1's scores ('rows') miss 'argmax'"),
    (lambda r: r["forwards"][1]["rows"].update(top_logp=None), "'top_logp' is null"),
    (lambda r: r["forwards"][1]["rows"].update(entropy=[]), "rows disagree in length"),
])
def test_malformed_upload_names_the_field_not_an_exception(recorded, mutate, words):
    """Issue 37: a recording with a missing or mistyped field is refused with the field's name
    and what it should be, never an exception name (KeyError, TypeError) or a generic line."""
    import copy

    from ui.inspect import analyze_upload

    rec = copy.deepcopy(recorded["correct"]["recording"])
    mutate(rec)
    with pytest.raises(UserError) as e:
        analyze_upload(json.dumps(rec))
    msg = str(e.value)
    assert words in msg and "\n" not in msg, msg
    assert not any(x in msg for x in ("KeyError", "TypeError", "AttributeError", "wrong type or shape"))


def test_evidence_reads_as_key_value_lines_with_ids_as_text(recorded):
    """Issue 37: evidence is `key: value` lines, not a Python repr; token ids carry their text
    and a long id list shows as (cut) text with its length, not 40 raw ids."""
    import re

    from components.findings import SHOWN_IDS, evidence_lines
    from ui.inspect import _texts

    texts = _texts()
    found = recorded["no_resync"]["findings"]
    html = findings_html(found, texts)
    evs = re.findall(r'<div class="ss-rf-evl">(.*?)</div>', html)
    assert evs and not any(ch in line for line in evs for ch in ("{'", "['", "={", "=["))
    ends = [f["evidence"] for f in found if f["code"] == "unverified_end"]
    assert ends and f"tokens: «{texts(ends[0]['tokens'][0])}" in "".join(evidence_lines(ends[0], texts))
    ids = (recorded["no_resync"]["recording"]["out_ids"] * 3)[:SHOWN_IDS + 16]
    line = evidence_lines({"tokens": ids}, texts)[0]
    assert line == "tokens: «" + "".join(texts(i) for i in ids[:SHOWN_IDS]) + f"…» ({len(ids)} tokens)", line
    stale = next(f for f in found if f["code"] == "stale_cache")["evidence"]
    line = next(x for x in evidence_lines(stale, texts) if x.startswith("tokens:"))
    fed, com = stale["tokens"]["fed"], stale["tokens"]["committed"]
    assert line == f"tokens: fed {fed} «{texts(fed)}» · committed {com} «{texts(com)}»"
    assert "position: " in "".join(evidence_lines(stale, texts)) and "«" not in next(
        x for x in evidence_lines(stale, texts) if x.startswith("position:"))
    assert evidence_lines({"lost": list(range(30)), "n_lost": 30}) == [
        "lost: 0, 1, 2, 3, 4, 5, 6, 7, … (30 in all)", "n lost: 30"]


def test_token_count_is_lives_and_says_the_stop_token():
    """Issue 37: recording `correct` and the Live decoder on the same clip and knobs produce the
    same ids, and both counts come from one place (metrics new_tokens, the stop token included
    as Live counts it); the Inspect line says that the last token is the stop token."""
    from components.inspect_view import counts_line, recording_counts
    from specdec_core.api import load_backend, prepare
    from specdec_core.decoding.config import DecodeConfig
    from specdec_core.decoding.decoder import SpeculativeDecoder
    from ui.inspect import record_example

    res = record_example("correct", "angry_01", max_new_tokens=64)
    demo = load_backend("demo")
    cfg = DecodeConfig(k=4, max_new_tokens=64, stop_at_first_sentence=False)
    live = SpeculativeDecoder(demo, cfg, dependence=False).run(
        prepare(demo, "sample_audio/angry_01.wav", cfg)).to_dict()
    assert live["token_ids"] == res["trace"]["token_ids"] and live["ended_by"] == res["trace"]["ended_by"] == "eos"
    c = recording_counts(res["trace"], res["recording"])
    assert c["tokens"] == live["metrics"]["new_tokens"] == len(live["tokens"]) == recording_counts(live, None)["tokens"]
    assert counts_line(c).startswith(f"{c['tokens']} tokens (the last, <|im_end|>, is the stop token)")


def test_no_resync_counts_agree_and_say_what_each_counts(recorded):
    """Issue 37: rounds (as the recorder rebuilds them), cloud calls (= cloud forwards, the
    drill-down's steps) and unchecked drafts (the legend's count) are each defined once and the
    line says how they relate: no '14 cloud calls' beside '3 rounds' unexplained."""
    from components.inspect_view import counts_line, recording_counts

    res = recorded["no_resync"]
    tr, rec = res["trace"], res["recording"]
    c = recording_counts(tr, rec)
    steps = [label for label, _ in round_choices(rec) if label.startswith("cloud call")]
    assert c["calls"] == len(steps) == sum(f["model"] == "cloud" for f in rec["forwards"])
    assert c["rounds"] == len(tr["rounds"]) and c["checked"] == tr["metrics"]["cloud_calls"]
    assert c["unchecked"] == tr["metrics"]["draft_only_tokens"]
    assert c["calls"] > c["checked"] and c["unchecked"] > 0          # the bug's signature
    line = counts_line(c)
    assert (f"{c['rounds']} rounds rebuilt from what was committed: {c['checked']} checked by a cloud call, "
            f"{c['rounds'] - c['checked']} not") in line
    assert (f"{c['calls']} cloud calls (forwards of the cloud): {c['checked']} checked a round, "
            f"{c['calls'] - c['checked']} checked nothing that was committed") in line
    assert f"{c['unchecked']} unchecked drafts" in line
    assert line in round_html(rec, 1, None, c)            # the drill-down says the same
    ok = recording_counts(recorded["correct"]["trace"], recorded["correct"]["recording"])
    assert "each checked by a cloud call" in counts_line(ok) and "nothing" not in counts_line(ok)


def test_a_recording_whose_run_failed_is_never_read_as_clean(recorded):
    """Issue 37: an uploaded recording with an `error` (or a `record` output whose result
    failed) shows the error, no green 'No findings' card; pooled, its row is not 'no error'."""
    from components.inspect_view import pooled_html
    from ui.inspect import analyze_pool, analyze_upload

    rec = dict(recorded["correct"]["recording"], error="decode raised ValueError: boom")
    cli = {"backend": "demo", "results": [{"audio": "x.wav", "ok": False, "error": "decoder failed: boom",
                                           "recording": recorded["correct"]["recording"]}]}
    for raw, err in ((json.dumps(rec), "ValueError: boom"), (json.dumps(cli), "decoder failed: boom")):
        res = analyze_upload(raw)
        assert not res["ok"] and err in res["error"]
    entries, _ = analyze_pool([("bad", json.dumps(rec)), ("good", json.dumps(recorded["correct"]["recording"]))])
    html = pooled_html(entries)
    bad_row = html[html.index('data-label="bad"'):html.index('data-label="good"')]
    assert "no error" not in bad_row and "the run ended in an error: decode raised ValueError: boom" in bad_row
    assert "no error" in html[html.index('data-label="good"'):]


def test_example_decoders_listed_by_group_with_title_and_description():
    """Issue 37: the decoder list is grouped (correct loops, one bug each, trees, heads) and
    each entry has a human title and the docstring's first line, not only a snake_case name."""
    import re

    from ui.inspect import GROUPS, _doc, example_choices, example_group, example_names

    choices = example_choices()
    names = [n for _, n in choices]
    assert sorted(names) == sorted(p.stem for p in __import__("ui.inspect", fromlist=["x"]).EXAMPLES_DIR.glob("*.py"))
    groups = [example_group(n) for n in names]
    assert groups == sorted(groups, key=GROUPS.index) and set(groups) == set(GROUPS)   # in group order
    assert names[0] == "correct" and names == example_names()
    for label, name in choices:
        group, rest = label.split(" · ", 1)
        title, desc = rest.split(" — ", 1)
        assert group == example_group(name) and "_" not in title and title[:1].isupper(), label
        first = re.sub(r"^Bug( \([^)]*\))?:\s*", "", " ".join(_doc(name).split("\n\n")[0].split()))
        assert first[:12].lower() in desc.lower(), (label, first)
        assert desc.endswith(f"({name}.py)")
    by = dict((n, l) for l, n in choices)
    assert by["no_resync"].startswith("One bug each · No resync — No cache rollback after a correction")
    assert by["tree_no_compaction"].startswith("Trees · No compaction — Bug: the KV cache")
    assert by["head_stale_features"].startswith("Heads · Stale features — ")
    assert by["sampling_correct"].startswith("Correct loops · Sampling correct — ")


def test_head_loop_records_with_the_head_and_finds_stale_features_as_the_cli():
    """Issue 35 item 3/4 on the Inspect tab: a head example gets a private copy of the backend's
    head (drafter=), so head_stale_features.py finds stale_features as `record` does; each
    drafted token says the head drafted it; the shared head keeps no hooks."""
    from specdec_core.api import load_backend
    from specdec_core.recorder.driver.clip import load_function, record_clip
    from ui.inspect import EXAMPLES_DIR, record_example

    demo = load_backend("demo")
    res = record_example("head_stale_features", "sad_01")
    assert res["ok"], res["error"]
    codes = {f["code"] for f in res["findings"]}
    fn, path = load_function(f"{EXAMPLES_DIR / 'head_stale_features.py'}:decode")
    cli = record_clip(fn, path, demo, "sample_audio/sad_01.wav",
                      {"k": 4, "max_new_tokens": 128, "verify": "greedy", "prompt_type": "detailed"})
    assert "stale_features" in codes and codes == {f["code"] for f in cli["findings"]}
    assert res["trace"]["token_ids"] == cli["token_ids"] and res["recording"]["drafter"] == "head"
    drafted = [t for t in res["trace"]["tokens"] + res["trace"]["rejected"] if t["source"] in ("accepted", "rejected")]
    assert drafted and {t["drafter"] for t in drafted} == {"head"}
    assert {t["drafter"] for t in res["trace"]["tokens"] if t["source"] in ("corrected", "bonus")} == {None}
    assert not demo.head._forward_hooks and not demo.head._forward_pre_hooks
    edge = record_example("correct", "sad_01", max_new_tokens=16)["trace"]
    assert {t["drafter"] for t in edge["tokens"] if t["source"] == "accepted"} == {"edge"}


def test_status_counts_findings_as_the_cards_show_them(recorded):
    """The status counts the top-level cards and the symptoms folded under them, not every
    finding as an error beside one red card."""
    from components.findings import findings_count, split_explained

    found = recorded["no_resync"]["findings"]
    roots, nested = split_explained(found)
    folded = sum(map(len, nested.values()))
    assert folded and findings_count(found).startswith(f"{len(roots)} finding")
    assert f"and {folded} symptom" in findings_count(found)
    assert findings_count([]) == "no findings"
    html = findings_html(found)
    assert html.count('class="ss-finding ss-sev-') == len(roots) + folded


def test_the_pages_ten_line_loop_records_without_an_error_finding(tmp_path):
    """The loop Inspect shows (components.inspect_view.RECORD_EXAMPLE) through the real `record`:
    correct output, only the recomputed-context warning the page announces."""
    import json as _json

    from components.inspect_view import RECORD_EXAMPLE
    from specdec_core.cli import main

    loop = tmp_path / "my_loop.py"
    loop.write_text("import torch\n" + RECORD_EXAMPLE + "\n", encoding="utf-8")
    out = tmp_path / "rec.json"
    assert main(["record", f"{loop}:decode", "sample_audio/sad_01.wav", "--set", "max_new_tokens=24",
                 "--out", str(out)]) == 0
    res = _json.loads(out.read_text(encoding="utf-8"))["results"][0]
    assert res["ok"] and res["recording"]["out_ids"]
    codes = {f["code"]: f["severity"] for f in res["findings"]}
    # the timed findings (wall-clock shares) may come on a busy machine; nothing else may
    assert "error" not in codes.values() and set(codes) <= {"recomputed_context", "loop_overhead"}, codes


def test_idle_cloud_calls_say_the_cloud_ran_on_another_context(recorded):
    """Issue 50 (3): '12 cloud calls ... 2 checked a round' beside '40 unchecked drafts' reads as
    a contradiction unless the line says why: the cloud ran on a context that is not the text."""
    from components.inspect_view import counts_line, recording_counts

    res = recorded["no_resync"]
    c = recording_counts(res["trace"], res["recording"])
    line = counts_line(c)
    idle = c["calls"] - c["checked"]
    assert c["off_text"] in ("stale_cache", "context_mismatch"), c      # the root the findings name
    assert (f"{idle} checked nothing that was committed: they ran on a context that is not the text "
            f"({c['off_text'].replace('_', ' ')})") in line
    assert ("unchecked drafts: committed with no cloud call checking them (the cloud was called, on "
            "another context)") in line
    assert line in round_html(res["recording"], 1, None, c)
    ok = recording_counts(recorded["correct"]["trace"], recorded["correct"]["recording"])
    assert ok["off_text"] is None and "context" not in counts_line(ok)


def test_recording_your_own_file_from_the_page_is_an_operator_setting(monkeypatch, tmp_path):
    """Issue 50 (6): the page records a user's .py only with SPECSCOPE_RECORD_OWN_CODE=1, never on
    a Space (SPACE_ID: it would run a visitor's code); off, it refuses in one line naming how."""
    import shutil

    from specdec_core.errors import UserError
    from ui.inspect import OWN_CODE_ENV, own_code_allowed, record_example

    mine = tmp_path / "my_loop.py"
    shutil.copy(ROOT / "examples" / "decoders" / "no_resync.py", mine)
    monkeypatch.delenv(OWN_CODE_ENV, raising=False)
    monkeypatch.delenv("SPACE_ID", raising=False)
    assert not own_code_allowed()
    with pytest.raises(UserError, match=f"{OWN_CODE_ENV}=1"):
        record_example("correct", "angry_01", own=str(mine), max_new_tokens=24)
    monkeypatch.setenv(OWN_CODE_ENV, "1")
    monkeypatch.setenv("SPACE_ID", "someone/specscope")
    assert not own_code_allowed()
    monkeypatch.delenv("SPACE_ID")
    assert own_code_allowed()
    res = record_example("correct", "angry_01", own=str(mine), max_new_tokens=24)
    assert res["decoder"] == "my_loop.py" and res["ok"]
    assert any(f["severity"] == "error" for f in res["findings"])          # its bug, found blind
    bad = tmp_path / "bad_sig.py"
    bad.write_text("def decode(edge, cloud, ids):\n    return []\n", encoding="utf-8")
    with pytest.raises(UserError, match="cannot be called as record calls it"):
        record_example("correct", "angry_01", own=str(bad))
