"""Issue 37: one visitor cannot take a shared server from everyone else. The operator's caps
(specdec_core/caps.py) and their lines, then the app served on 0.0.0.0 with its default caps, as
on a Space: a run over a cap is cut with a line naming the cap and its variable, a second run of
one session is refused with a line, an ordinary run beside a run at the caps finishes (how fast:
scripts/load_test.py, never timed here), a queued visitor's status line says how many runs are
ahead (chromium), and a recording with 200,000 ids no model was fed is refused with a line while
the server's resident memory stays flat. The round-by-round sharing of the decode slots:
tests/test_slots.py."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from browser_util import app_process, launch_chromium, wait_state
from poll import wait_until
from test_recorder_unit import recording, round1

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import load_test  # noqa: E402  (scripts/load_test.py)

from specdec_core import caps  # noqa: E402
from specdec_core.decoding.config import KNOBS, DecodeConfig  # noqa: E402
from specdec_core.recorder.normalize.validate import RecordingRefused, check_recording  # noqa: E402


@pytest.fixture
def app_on(monkeypatch):
    """This process as the app, served on the given address."""
    monkeypatch.setattr(caps, "_APP", [True])
    for var in ("SPACE_ID", "GRADIO_SHARE", *(c.env for c in caps.CAPS.values())):
        monkeypatch.delenv(var, raising=False)

    def serve(name, **env):
        monkeypatch.setenv("GRADIO_SERVER_NAME", name)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
    return serve


def test_defaults_follow_where_the_app_serves(app_on, monkeypatch):
    app_on("127.0.0.1")
    assert caps.cap("max_new_tokens") == KNOBS["max_new_tokens"].maximum   # the knob's own range
    assert caps.cap("time_limit_s") == 0 and caps.cap("runs_per_session") == 4
    app_on("0.0.0.0")
    assert (caps.cap("max_new_tokens"), caps.cap("time_limit_s"), caps.cap("runs_per_session")) == (512, 60, 1)
    assert (caps.cap("recording_forwards"), caps.cap("recording_ids")) == (5000, 100_000)
    app_on("127.0.0.1", SPACE_ID="someone/specscope")
    assert caps.cap("max_new_tokens") == 512
    app_on("0.0.0.0", SPECSCOPE_MAX_NEW_TOKENS="2048", SPECSCOPE_TIME_LIMIT_S="oops")
    assert caps.cap("max_new_tokens") == 2048 and caps.cap("time_limit_s") == 60
    monkeypatch.setattr(caps, "_APP", [False])        # the library and the CLI: loopback's
    assert caps.cap("recording_ids") == 400_000


def test_a_run_over_a_cap_is_cut_and_its_end_says_which_cap(app_on):
    app_on("0.0.0.0")
    asked = DecodeConfig(max_new_tokens=4096, time_limit_s=0)
    ran = caps.cap_config(asked)
    assert (ran.max_new_tokens, ran.time_limit_s) == (512, 60)
    assert caps.cap_config(DecodeConfig()) == DecodeConfig()          # within the caps: as asked
    [note] = caps.cut_notes(asked, ran, "max_tokens")
    assert note["message"] == ("ended by this server's cap on max new tokens: 512 per run (asked 4096); "
                               "the operator raises it with SPECSCOPE_MAX_NEW_TOKENS")
    trace = {"ended_by": "time_limit", "warnings": [{"kind": "time_limit", "message": "hit 60 s"}]}
    caps.note_cuts(trace, asked, ran)
    assert [w["message"] for w in trace["warnings"]] == [
        "ended by this server's cap on time limit: 60 s per run (asked none); "
        "the operator raises it with SPECSCOPE_TIME_LIMIT_S"]
    assert caps.cut_notes(asked, ran, "sentence") == []               # a cap that did not end it


def big_recording(n_out: int = 200_000) -> dict:
    return recording(round1(), [4] * n_out)


def test_ids_no_model_was_fed_are_refused_by_the_thousand():
    with pytest.raises(RecordingRefused, match=r"inconsistent\): 200,000 output ids, but its 3 forwards "
                                               r"were fed only 9 ids: 199,991 ids no model was fed"):
        check_recording(big_recording())
    check_recording(big_recording(900))       # a few more than fed: not by the thousand


# --- the app served on 0.0.0.0 with its default caps ---------------------------------------------

@pytest.fixture(scope="module")
def server():
    with app_process(env={"GRADIO_SERVER_NAME": "0.0.0.0"},
                     log_name="caps-server.log") as (url, proc):
        yield {"url": url, "pid": proc.pid}


def wait_running(jobs) -> None:
    """Poll until every submitted job is queued on or decoding at the server (not a sleep)."""
    from gradio_client.utils import Status

    on = {Status.IN_QUEUE, Status.PROCESSING, Status.ITERATING, Status.PROGRESS}
    wait_until(lambda: all(j.status().code in on or j.done() for j in jobs),
               "every job queued or running at the server", every=0.1)


def test_a_run_at_the_caps_is_cut_with_the_caps_line_beside_an_ordinary_run(server):
    """One visitor asks for 4096 tokens at k 32 with no stop: the server cuts it to its cap (512)
    and the run's end names the cap and its variable. That visitor's second run while the first
    is on is refused with the runs-per-session line; another visitor's ordinary run beside it
    finishes (its time beside the run at the caps: scripts/load_test.py)."""
    import httpx
    from gradio_client import Client

    url = server["url"]
    heavy_cfg = {**load_test.heavy_config("0.0.0.0"), "max_new_tokens": 4096, "time_limit_s": 0}
    ordn, heavy = (Client(url, verbose=False, httpx_kwargs={"timeout": 600}) for _ in range(2))
    job = heavy.submit(load_test.SAMPLE, None, json.dumps(heavy_cfg), "demo", False, api_name="/run")
    wait_running([job])
    with pytest.raises(httpx.HTTPStatusError) as refused:     # the queue answers 400 with the line
        heavy.predict(load_test.SAMPLE, None, "{}", "demo", False, api_name="/run")
    assert ("You already have 1 run queued or running (this server's cap on runs per session; the "
            "operator raises it with SPECSCOPE_MAX_QUEUED_PER_SESSION)") in refused.value.response.text
    res, text = ordn.predict(load_test.SAMPLE, None, "{}", "demo", False, api_name="/run")
    assert res["ok"] and text and res["metrics"]["ended_by"] != "time_limit"
    res = job.result(timeout=600)[0]
    lines = [w["message"] for w in res["trace"]["warnings"] if w["kind"] == "server_cap"]
    if res["metrics"]["ended_by"] == "max_tokens":
        assert res["metrics"]["new_tokens"] == 512
        assert lines == ["ended by this server's cap on max new tokens: 512 per run (asked 4096); "
                         "the operator raises it with SPECSCOPE_MAX_NEW_TOKENS"], lines
    else:   # a loaded machine: the time cap came first, and says so
        assert res["metrics"]["ended_by"] == "time_limit" and res["metrics"]["new_tokens"] < 512
        assert lines == ["ended by this server's cap on time limit: 60 s per run (asked none); "
                         "the operator raises it with SPECSCOPE_TIME_LIMIT_S"], lines


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.browser
def test_a_queued_visitor_sees_the_waiting_line_and_a_huge_recording_is_refused(server, tmp_path, artifacts):
    """Other visitors' runs fill what the server admits at once (ui/limits.ADMIT: they share the
    decode slots round by round): pressing Run shows "waiting: N runs ahead" in the status line
    (not "Pick a clip"), and the run goes on once they stop. Then a recording
    of 200,000 ids no model was fed is refused with its line, three times, the server's resident
    memory flat."""
    playwright_api = pytest.importorskip("playwright.sync_api")
    from gradio_client import Client

    from ui.limits import ADMIT

    url, cfg = server["url"], load_test.heavy_config("0.0.0.0")       # 60 s: stopped below
    others = [Client(url, verbose=False, httpx_kwargs={"timeout": 300}) for _ in range(ADMIT)]
    bigs = [tmp_path / f"rec-200k-{i}.json" for i in range(3)]
    for i, f in enumerate(bigs):
        f.write_text(json.dumps(big_recording(200_000 + i)), encoding="utf-8")
    with playwright_api.sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.goto(url)
        page.wait_for_selector("#live-run")
        jobs = [c.submit(load_test.SAMPLE, None, json.dumps(cfg), "demo", False, api_name="/run")
                for c in others]
        wait_running(jobs)                            # all are decoding now
        page.click("#live-run")
        page.wait_for_function("() => document.querySelector('#live-status')?.innerText"
                               f".includes('waiting: {ADMIT} runs ahead')", timeout=120_000)
        page.screenshot(path=str(artifacts / "caps-waiting.png"))
        for c, j in zip(others, jobs):
            c.predict(api_name="/live_stop")
            j.result(timeout=300)
        assert wait_state(page, "live-status", timeout=180_000) in ("ok", "warn")
        before = rss_mb(server["pid"])
        for i, big in enumerate(bigs):
            page.goto(url)
            page.get_by_role("tab", name="Inspect").click()
            page.locator("#inspect-upload input[type=file]").set_input_files(str(big))
            page.wait_for_function("() => document.querySelector('#inspect-status')?.innerText"
                                   ".includes('ids no model was fed')", timeout=120_000)
            status = page.inner_text("#inspect-status")
            assert f"200,00{i} output ids" in status and "Traceback" not in status, status
        time.sleep(1)
        after = rss_mb(server["pid"])
        browser.close()
    print(f"server RSS {before:.0f} MB before three 200,000-id uploads, {after:.0f} MB after")
    assert after - before < 30, (before, after)
