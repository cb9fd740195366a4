"""A recording made in the app while other sessions decode contains only its own forwards:
through the real server (gradio_client), `/record` with concurrent `/run` calls gives the same
forwards, findings and output as the same recording made alone."""
from __future__ import annotations

import json
import threading
import time

import pytest
from gradio_client import Client

from browser_util import app_server

DECODER, SAMPLE = "correct", "happy_02"


@pytest.fixture(scope="module")
def url():
    with app_server() as u:
        yield u


# findings measured from wall-clock shares (recorder/checks/speed/speed.py): a concurrent decode changes the
# timing by design, so they are not part of "the same recording"
TIMED = {"loop_overhead", "recomputed_context"}


def _summary(res: dict) -> dict:
    fw = res["recording"]["forwards"]
    return {"token_ids": res["token_ids"],
            "findings": sorted((f["code"], f["severity"]) for f in res["findings"]
                               if f["code"] not in TIMED),
            "n_forwards": len(fw),
            "forwards": [(f["model"], f["cache_len"], f["ids"]) for f in fw]}


def test_recording_is_isolated_from_concurrent_runs(url):
    alone = _summary(Client(url, verbose=False).predict(DECODER, SAMPLE, api_name="/record"))
    assert alone["n_forwards"] > 10 and not [c for c, s in alone["findings"] if s == "error"]

    rec_client, run_client = Client(url, verbose=False), Client(url, verbose=False)
    runs_at: list[tuple[float, float]] = []       # (submitted, finished) of each /run
    stop = threading.Event()

    def runs():              # another session decoding back to back (one of the two slots)
        clips = ("angry_01", "sad_03", "worried_01")
        while not stop.is_set():
            start = time.monotonic()
            res, _ = run_client.predict(clips[len(runs_at) % 3], None,
                                        json.dumps({"max_new_tokens": 8}), "demo", False,
                                        api_name="/run")
            assert res["ok"]
            runs_at.append((start, time.monotonic()))

    th = threading.Thread(target=runs)
    th.start()
    try:
        while not runs_at:   # the other session is decoding
            time.sleep(0.05)
        inside = 0
        for _ in range(4):   # until a whole /run was served while /record was in flight
            t0 = time.monotonic()
            together = _summary(rec_client.predict(DECODER, SAMPLE, api_name="/record"))
            t1 = time.monotonic()
            assert together == alone
            inside = sum(t0 < s and e < t1 for s, e in list(runs_at))
            if inside:
                break
    finally:
        stop.set()
        th.join(timeout=300)
    # a run submitted after the recording began finished before it ended: the two really ran at
    # once (a server that served them one after the other could not do this)
    assert inside >= 1, runs_at
