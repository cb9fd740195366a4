"""Serving under load and abuse, through the real app in its own process and gradio_client:
16 concurrent decodes each get their own trace, cancel stops the work (the server's CPU time
stops growing), a per-decode time limit, per-run streaming throttle, upload cap and clean-up,
and one-line messages for bad requests."""
from __future__ import annotations

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from browser_util import app_process
from poll import wait_until

ROOT = Path(__file__).resolve().parents[1]
CACHE_AGE_S = 6
# A decode that runs for minutes on the demo pair: the fault ignores <|im_end|>, one token per
# round, and a cache-free recompute every round makes each round slower as the text grows.
LONG = {"k": 1, "max_new_tokens": 4096, "stop_at_first_sentence": False, "cache_check_every": 1,
        "faults": ["special_text_stop"], "time_limit_s": 0}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serving")
    env = {"GRADIO_TEMP_DIR": str(tmp / "gradio"), "SPECSCOPE_EXPORT_DIR": str(tmp / "exports"),
           "SPECSCOPE_MAX_FILE_SIZE": "1mb", "SPECSCOPE_CACHE_EVERY_S": "2",
           "SPECSCOPE_CACHE_MAX_AGE_S": str(CACHE_AGE_S), "SPECSCOPE_TIME_LIMIT_S": "45"}
    with app_process(env=env, log_name="serving-server.log") as (url, proc):
        yield {"url": url, "pid": proc.pid, "tmp": tmp}


@pytest.fixture(scope="module")
def client(server):
    return Client(server["url"], verbose=False, httpx_kwargs={"timeout": 60})


def ui_args(client: Client, api_name: str, **values) -> list:
    """The inputs of a UI event, at the page's defaults, with some replaced by label."""
    dep = next(d for d in client.config["dependencies"] if d.get("api_name") == api_name)
    comps = {c["id"]: c for c in client.config["components"]}
    args = []
    for cid in dep["inputs"]:
        props = comps[cid]["props"]
        label = props.get("label")
        args.append(values[label] if label in values else props.get("value"))
    return args


def live_args(client, sample: str = "angry_01", **knobs) -> list:
    labels = {"sample clip": sample, "or upload / record a clip (WAV, FLAC, OGG)": None}
    from specdec_core.decoding.config import KNOBS

    for name, value in knobs.items():
        labels["faults" if name == "faults" else KNOBS[name].label] = value
    return ui_args(client, "live_run", **labels)


# --- 16 concurrent calls: each its own complete, correct trace --------------------------------

CLIPS = ["angry_01", "sad_01", "happy_02", "neutral_03", "worried_01", "surprise_02", "angry_03",
         "sad_02"]
KNOB_SETS = [
    {"k": 2}, {"k": 6, "verify": "rank", "rank_threshold": 3},
    {"k": 4, "entropy_threshold": 1.5}, {"k": 3, "verify": "sampling", "temperature": 0.8, "seed": 7},
    {"k": 5, "prompt_type": "concise"}, {"k": 4, "comma_gate": 4, "period_gate": 8,
                                         "ban_adjacent_repeat": True},
    {"k": 1, "max_new_tokens": 30}, {"k": 8, "no_repeat_ngram": 3, "repetition_penalty": 1.2},
]


def test_16_concurrent_runs_each_get_their_own_correct_trace(server):
    from specdec_core.api import load_backend, run_clip
    from specdec_core.decoding.config import DecodeConfig

    jobs = [(CLIPS[i % 8], {**KNOB_SETS[(i * 3) % 8], "max_new_tokens": 40 + 3 * i, "time_limit_s": 0})
            for i in range(16)]
    clients = [Client(server["url"], verbose=False, httpx_kwargs={"timeout": 60}) for _ in range(4)]
    submitted = [clients[i % 4].submit(clip, None, json.dumps(cfg), "demo", False, api_name="/run")
                 for i, (clip, cfg) in enumerate(jobs)]
    results = [job.result(timeout=600) for job in submitted]
    backend = load_backend("demo")
    for (clip, cfg), (res, text) in zip(jobs, results):
        direct = run_clip(backend, str(ROOT / "sample_audio" / f"{clip}.wav"), DecodeConfig.from_dict(cfg))
        tr = res["trace"]
        assert res["ok"] and res["audio"] == clip
        assert tr["config"]["k"] == cfg["k"] and tr["config"]["max_new_tokens"] == cfg["max_new_tokens"]
        assert res["token_ids"] == direct["token_ids"], (clip, cfg)
        assert text == res["text"] == direct["text"]
        assert [t["source"] for t in tr["tokens"]] == [t["source"] for t in direct["trace"]["tokens"]]
        assert len(tr["rounds"]) == len(direct["trace"]["rounds"])
        assert tr["metrics"]["ended_by"] == direct["metrics"]["ended_by"] != "cancelled"
    assert len({tuple(r[0]["token_ids"]) for r in results}) > 8   # the calls really differ


# --- cancel stops the work ---------------------------------------------------------------------

def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds per thread of the server process."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            out[int(task.name)] = cpu_seconds_of(task / "stat")
        except (OSError, ValueError):
            pass
    return out


def cpu_seconds_of(stat: Path) -> float:
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_rates(pid: int, seconds: float = 2.0) -> dict[int, float]:
    a = thread_cpu(pid)
    time.sleep(seconds)
    b = thread_cpu(pid)
    return {t: (b[t] - a.get(t, 0.0)) / seconds for t in b}


def hot_threads(pid: int, idle: dict[int, float], seconds: float = 2.0) -> dict[int, float]:
    """Threads burning CPU now (the decodes) well above their `idle` rate, with their CPU s/s.
    The machine may be shared, so 'burning' is relative: half the busiest thread's extra rate."""
    extra = {t: r - idle.get(t, 0.0) for t, r in thread_rates(pid, seconds).items()}
    top = max(extra.values(), default=0.0)
    return {t: round(r, 3) for t, r in extra.items() if r >= max(0.03, top / 2)}


def assert_work_stops(pid: int, idle: dict[int, float], hot: dict[int, float], what: str) -> None:
    """Soon after the cancel (a decode ends within one round; the 120 s bound is only a guard
    against a decode that never stops: LONG alone runs for many minutes) the server is back to its idle CPU rate (measured before the
    call) and the decode threads gain (almost) nothing; then it stays so for 2 s. Idle worker
    threads also serve small jobs (files, /config), hence a small tolerance, far below a
    decode's rate even on a crowded machine."""
    idle_total = sum(idle.values())

    def quiet(seconds: float) -> tuple[bool, dict]:
        # "Gain" is over each thread's own idle rate: the server's event-loop thread idles at a
        # few hundredths of a CPU and can show up in `hot` right after a cancel (seen in CI).
        rates = thread_rates(pid, seconds)
        gains = {t: round(rates.get(t, 0.0) - idle.get(t, 0.0), 3) for t in hot}
        ok = sum(rates.values()) <= idle_total + 0.05 and all(g <= 0.03 for g in gains.values())
        return ok, gains

    # a decode that never stops keeps this loop going until pytest-timeout ends the test
    wait_until(lambda: quiet(1.0)[0], f"{what}: the server back at its idle CPU rate after the cancel",
               every=0)
    ok, rates = quiet(2.0)
    assert ok, f"{what}: CPU time grows again after the cancel {rates}"


ENDPOINTS = {
    "/run": lambda c: c.submit("angry_01", None, json.dumps(LONG), "demo", False, api_name="/run"),
    "/run_stream": lambda c: c.submit("angry_01", None, json.dumps(LONG), "demo", False,
                                      api_name="/run_stream"),
    "/batch": lambda c: c.submit(json.dumps(LONG), "", 2, None, [], "demo", api_name="/batch"),
}


@pytest.mark.parametrize("endpoint", list(ENDPOINTS))
def test_cancel_stops_the_decode_and_the_app_still_serves(server, endpoint):
    pid = server["pid"]
    c = Client(server["url"], verbose=False, httpx_kwargs={"timeout": 60})
    idle = thread_rates(pid)
    job = ENDPOINTS[endpoint](c)
    time.sleep(2)
    hot = hot_threads(pid, idle)
    assert sum(hot.values()) >= 0.1, f"the long decode is not running: {hot}"
    job.cancel()
    assert_work_stops(pid, idle, hot, endpoint)
    res, text = c.predict("sad_01", None, json.dumps({"max_new_tokens": 16}), "demo", False,
                          api_name="/run")
    assert res["ok"] and text


def test_cancelled_runs_and_queued_ones_leave_nothing_running(server):
    """ADMIT runs decode (taking turns for the decode slots) and two more wait in the queue;
    all are cancelled: nothing runs after, and the queued two never start."""
    from ui.limits import ADMIT

    pid = server["pid"]
    clients = [Client(server["url"], verbose=False, httpx_kwargs={"timeout": 60}) for _ in range(ADMIT + 2)]
    idle = thread_rates(pid)
    jobs = [ENDPOINTS["/run"](c) for c in clients]
    time.sleep(2)
    hot = hot_threads(pid, idle)
    assert 1 <= len(hot) <= ADMIT, f"more decoding threads than the {ADMIT} runs admitted: {hot}"
    for job in jobs:
        job.cancel()
    time.sleep(1.0)   # the two queued calls must not start once the running ones are cancelled
    assert_work_stops(pid, idle, {**hot, **hot_threads(pid, idle, 1.0)}, f"{ADMIT + 2} x /run")


def test_ui_stop_button_ends_the_sessions_run(server):
    """The Live tab's Stop (same browser session as its Run) sets that run's cancel Event."""
    c = Client(server["url"], verbose=False, httpx_kwargs={"timeout": 60})
    idle = thread_rates(server["pid"])
    job = c.submit(*live_args(c, **LONG), api_name="/live_run")
    time.sleep(2)
    hot = hot_threads(server["pid"], idle)
    assert hot
    c.predict(api_name="/live_stop")
    outs = list(job)                      # ends within a round (how soon: never timed here)
    assert 'data-state="err"' in outs[-1][0] and "Stopped" in outs[-1][0] and "ended by the Stop button" in outs[-1][0]
    assert_work_stops(server["pid"], idle, hot, "Stop button")


# --- per-decode time limit -----------------------------------------------------------------------

def test_time_limit_ends_a_decode_cleanly(client):
    res, text = client.predict("sad_01", None, json.dumps({**LONG, "time_limit_s": 1.5}), "demo", False,
                               api_name="/run")
    m = res["metrics"]
    assert res["ok"] and m["ended_by"] == "time_limit" and res["trace"]["tokens"]
    # not cut before its limit (the decoder's own clock: a loaded machine only makes it longer);
    # how far past it the last round ends is scripts/bench_timings.py's
    assert m["wall_s"] >= 1.4 and m["new_tokens"] < LONG["max_new_tokens"]


def test_server_time_cap_applies_to_every_decode(client):
    """SPECSCOPE_TIME_LIMIT_S=45 on this server: no limit (0) or a longer one becomes 45 s."""
    for asked in (0, 600):
        res, _ = client.predict("sad_01", None, json.dumps({"time_limit_s": asked, "max_new_tokens": 8}),
                                "demo", False, api_name="/run")
        assert res["trace"]["config"]["time_limit_s"] == 45
    res, _ = client.predict("sad_01", None, json.dumps({"time_limit_s": 20, "max_new_tokens": 8}),
                            "demo", False, api_name="/run")
    assert res["trace"]["config"]["time_limit_s"] == 20


# --- streaming: per-run throttle, and the same text rule as the final text ------------------------

def _plot_refreshes(outs) -> int:
    """Intermediate outputs that carried a new entropy figure (index 5 of the Live outputs)."""
    return sum(1 for o in outs[:-1] if isinstance(o[5], dict) and "plot" in o[5])


def test_another_sessions_runs_do_not_throttle_this_sessions_plots(server):
    """Session A streams one long run while session B starts short runs back to back. With the
    throttle clock on the page-wide view objects, every B run (its reset, its final plots)
    pushed A's next plot refresh away: A got ~0 refreshes. Per run, A gets one per PLOT_EVERY
    (plus render time)."""
    from ui.views import PLOT_EVERY

    ca, cb = (Client(server["url"], verbose=False, httpx_kwargs={"timeout": 60}) for _ in range(2))
    with ThreadPoolExecutor(1) as pool:
        t0 = time.monotonic()
        fut = pool.submit(lambda: list(ca.submit(*live_args(ca, **{**LONG, "time_limit_s": 12}),
                                                  api_name="/live_run")))
        b_runs = 0
        while not fut.done():
            cb.predict(*live_args(cb, max_new_tokens=6, sample="sad_01"), api_name="/live_run")
            b_runs += 1
        outs, seconds = fut.result(), time.monotonic() - t0
    assert "ended by time limit" in outs[-1][0] and b_runs >= 3
    # 12 s of decoding: at least a third of the PLOT_EVERY periods even with slow renders
    assert _plot_refreshes(outs) >= max(3, int(12 / PLOT_EVERY / 3)), (_plot_refreshes(outs), b_runs, seconds)


def test_streamed_text_follows_the_final_texts_rule(client):
    cfg = {"k": 2, "max_new_tokens": 80, "stop_at_first_sentence": False, "faults": ["special_text_stop"]}
    outs = [res for res, _ in client.submit("angry_01", None, json.dumps(cfg), "demo", False,
                                            api_name="/run_stream")]
    final = outs[-1]
    assert final["done"] and any(t["text"] == "<|im_end|>" for t in final["trace"]["tokens"])
    partial = [o["text"] for o in outs if not o["done"]]
    assert partial and all("<|im_end|>" not in p for p in partial) and "<|im_end|>" not in final["text"]
    assert all(final["text"].startswith(p.rstrip("\ufffd")) for p in partial)


# --- uploads: size cap and clean-up ---------------------------------------------------------------

def _wav(path: Path, seconds: float) -> Path:
    rng = np.random.default_rng(0)
    sf.write(path, (0.1 * rng.standard_normal(int(16000 * seconds))).astype(np.float32), 16000,
             subtype="PCM_16")
    return path


def test_upload_over_the_size_cap_is_refused_by_the_server(server, tmp_path):
    big = _wav(tmp_path / "big.wav", 40)                      # 1.28 MB > the 1 MB cap
    r = httpx.post(server["url"] + "gradio_api/upload", files={"files": ("big.wav", big.read_bytes())})
    assert r.status_code == 413
    assert not list((server["tmp"] / "gradio").rglob("big.wav"))


def test_uploads_and_exports_are_cleaned_up(server, client, tmp_path):
    res, _ = client.predict("", handle_file(str(_wav(tmp_path / "mine.wav", 1.0))),
                            json.dumps({"max_new_tokens": 8}), "demo", False, api_name="/run")
    assert res["ok"]
    cache = server["tmp"] / "gradio"
    assert list(cache.rglob("mine.wav"))
    exports = server["tmp"] / "exports"

    def names():
        return {p.name for p in exports.iterdir()} if exports.is_dir() else set()

    c = Client(server["url"], verbose=False, httpx_kwargs={"timeout": 60})
    before = names()
    c.predict(*live_args(c, max_new_tokens=8), api_name="/live_run")
    first = names() - before
    assert len(first) == 2 and all(n.endswith(".json") for n in first)   # trace + results
    time.sleep(CACHE_AGE_S + 2.5)
    # Gradio's delete_cache (a loaded machine delays its task; it must come)
    wait_until(lambda: not list(cache.rglob("mine.wav")), "Gradio's cache clean-up", every=1)
    c.predict(*live_args(c, max_new_tokens=8), api_name="/live_run")
    assert len(names()) == 2 and not names() & (first | before)         # old exports pruned


# --- bad requests: one clear line each -----------------------------------------------------------

def _refused(client, *args, api_name="/run") -> str:
    with pytest.raises(AppError) as err:
        client.predict(*args, api_name=api_name)
    msg = str(err.value).strip()
    assert "\n" not in msg and "Traceback" not in msg and "unhashable" not in msg
    return msg


def test_nested_fault_list_is_a_clear_message(client):
    msg = _refused(client, "sad_01", None, json.dumps({"faults": [["x"]]}), "demo", False)
    assert "faults must be a list of fault names" in msg


@pytest.mark.parametrize("limit", [-3, 1.5])
def test_bad_batch_limit_is_refused_not_a_silent_slice(client, limit):
    msg = _refused(client, json.dumps({"max_new_tokens": 8}), "", limit, None, [], "demo",
                   api_name="/batch")
    assert "limit must be" in msg


def test_truncated_wav_upload_is_called_truncated(client, tmp_path):
    full = _wav(tmp_path / "whole.wav", 2.0)
    cut = tmp_path / "cut.wav"
    cut.write_bytes(full.read_bytes()[:3000])
    msg = _refused(client, "", handle_file(str(cut)), "", "demo", False)
    assert "truncated WAV" in msg and "cut.wav" in msg and "too short" not in msg


def test_unknown_sample_name_is_quoted_and_cut(client):
    name = "x" * 5000 + "\n<script>"
    msg = _refused(client, name, None, "", "demo", False)
    assert "unknown sample 'xxx" in msg and len(msg) < 400 and "<script>" not in msg
