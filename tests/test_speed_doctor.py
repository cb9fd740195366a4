"""Where the time goes (issue 20 item 2): our decoder's time split and a recorded decoder's, the
speed findings on the deliberately slow example loops (and none on correct.py), the timing
picture for a trace and a recording, and the picture in the Live tab through the real server.
Structure only: nothing here asserts that anything is fast."""
import time
from pathlib import Path

import pytest

from specdec_core.analysis.metrics import round_split, time_line, time_split
from specdec_core.api import load_backend, prepare
from specdec_core.decoding.config import DecodeConfig
from specdec_core.decoding.decoder import SpeculativeDecoder
from specdec_core.recorder.driver.clip import DEFAULTS, load_function, record_clip

ROOT = Path(__file__).resolve().parents[1]
CLIP = ROOT / "sample_audio" / "angry_01.wav"
PARTS = ("edge_s", "cloud_s", "remote_s", "other_s", "caller_s", "recorder_s")
SPEED = {"loop_overhead", "recomputed_context"}


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


@pytest.fixture(scope="module")
def recorded(demo):
    out = {}
    for name in ("correct", "slow_decode_text", "rerun_prompt"):
        fn, path = load_function(f"{ROOT}/examples/decoders/{name}.py:decode")
        out[name] = record_clip(fn, path, demo, CLIP, dict(DEFAULTS))
        assert out[name]["ok"], out[name].get("error")
    return out


def _adds_up(split: dict, tol: float = 1e-4) -> None:
    assert sum(split.get(k, 0.0) for k in PARTS) == pytest.approx(split["total_s"], abs=tol), split
    assert split["edge_s"] > 0 and split["cloud_s"] > 0 and split["other_s"] >= -tol, split


def test_our_decoder_splits_its_wall_per_round_and_in_total(demo):
    """Streamed with a slow consumer: its time is `caller_s`, not the loop's `other_s`."""
    prompt = prepare(demo, CLIP, DecodeConfig())
    for ev in SpeculativeDecoder(demo, DecodeConfig()).stream(prompt):
        if ev["type"] == "round":
            time.sleep(0.02)
    tr = ev["trace"]
    split = tr.metrics["time_split"]
    _adds_up(split)
    assert split["total_s"] == pytest.approx(tr.metrics["wall_s"], abs=1e-3)
    # the consumer's sleeps are the caller's part (a lower bound: sleeps only last longer); with
    # the parts adding up to the wall, they are not also in `other_s` (its size against the
    # caller's: scripts/bench_timings.py)
    assert split["caller_s"] >= 0.02 * len(tr.rounds), split
    for r in tr.rounds:
        assert r.round_s > 0 and r.edge_s + r.cloud_s <= r.round_s, r
    assert sum(r.edge_s + r.cloud_s for r in tr.rounds) == pytest.approx(
        split["edge_s"] + split["cloud_s"], abs=1e-3)
    assert time_line(split).startswith(f"time: {split['total_s']:.3f} s = edge ")


def test_remote_requests_are_their_own_part():
    """--cloud-url: the request's round trip (request_s) is `remote`, not cloud nor other."""
    from components.timing_plot import timing_figure

    rounds = [{"round": 1, "round_s": 0.5, "edge_s": 0.1, "cloud_s": 0.0, "request_s": 0.3},
              {"round": 2, "round_s": 0.2, "edge_s": 0.1, "cloud_s": 0.0, "request_s": None}]
    split = time_split(rounds, 0.8)
    assert (split["remote_s"], split["other_s"]) == (0.3, pytest.approx(0.3)), split
    assert round_split(rounds[0])["other_s"] == pytest.approx(0.1)
    fig = timing_figure({"rounds": rounds, "metrics": {"time_split": split}})
    assert "remote cloud requests" in {t.name for t in fig.data} and "· remote 3" in fig.layout.title.text


def test_recording_time_split_adds_up_per_rebuilt_round(recorded):
    for name, res in recorded.items():
        split, rounds = res["time_split"], res["trace"]["rounds"]
        _adds_up(split)
        assert split["recorder_s"] > 0
        assert sum(r["round_s"] for r in rounds) == pytest.approx(split["total_s"], abs=1e-3), name
        assert sum(r["edge_s"] for r in rounds) == pytest.approx(split["edge_s"], abs=1e-4), name
        fw = res["recording"]["forwards"]
        assert all(f["time"]["dur"] > 0 and f["time"]["t"] >= 0 for f in fw), name


def test_slow_loops_get_their_findings_and_correct_does_not(recorded):
    codes = {n: {f["code"] for f in r["findings"]} & SPEED for n, r in recorded.items()}
    assert codes == {"correct": set(), "slow_decode_text": {"loop_overhead"},
                     "rerun_prompt": {"recomputed_context"}}, codes
    slow = next(f for f in recorded["slow_decode_text"]["findings"] if f["code"] == "loop_overhead")
    assert slow["evidence"]["other_share"] == recorded["slow_decode_text"]["time_split"]["other_share"]
    assert "%" in slow["title"] and "between draft steps" in slow["detail"]
    rerun = next(f for f in recorded["rerun_prompt"]["findings"] if f["code"] == "recomputed_context")
    assert rerun["evidence"]["share"] > 0.5
    # both slow loops still decode correctly: the cloud's greedy text, as correct.py gives it
    assert recorded["slow_decode_text"]["token_ids"] == recorded["correct"]["token_ids"]
    assert recorded["rerun_prompt"]["token_ids"] == recorded["correct"]["token_ids"]


def test_timing_picture_for_a_trace_and_a_recording(demo, recorded):
    from components.timing_plot import timing_figure

    ours = SpeculativeDecoder(demo, DecodeConfig()).run(prepare(demo, CLIP, DecodeConfig())).to_dict()
    for obj in (ours, recorded["slow_decode_text"]["trace"], recorded["slow_decode_text"]["recording"]):
        fig = timing_figure(obj)
        names = {t.name for t in fig.data}
        assert {"edge forwards", "cloud forwards"} <= names and fig.layout.barmode == "stack"
        assert fig.layout.title.text.startswith("Where the time goes: ")
        # the bars add up to the rounds' wall: the whole recording, or our decode's rounds
        want = (sum(r["round_s"] for r in obj["rounds"]) if obj is ours
                else recorded["slow_decode_text"]["time_split"]["total_s"])
        assert sum(sum(t.y) for t in fig.data) == pytest.approx(1e3 * want, rel=1e-3)
    assert "recorder hooks" in {t.name for t in timing_figure(recorded["correct"]["recording"]).data}
    assert not timing_figure({"rounds": [{"round": 1, "drafted": 4}]}).data   # an old trace


@pytest.mark.browser
def test_live_tab_shows_the_timing_picture_after_a_run(artifacts):
    playwright_api = pytest.importorskip("playwright.sync_api")
    from browser_util import app_server, launch_chromium, wait_state

    with app_server() as url, playwright_api.sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        page.goto(url)
        page.wait_for_selector("#live-run")
        page.click("#live-run")
        assert wait_state(page, "live-status", timeout=180_000) in ("ok", "warn"), page.inner_text("#live-status")
        page.wait_for_selector("#live-timing .bars path", timeout=120_000)
        assert "Where the time goes:" in page.inner_text("#live-timing")
        page.locator("#live-timing").screenshot(path=str(artifacts / "live-timing.png"))
        browser.close()
