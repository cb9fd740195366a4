"""The named endpoints of app.py through gradio_client, against the real app and demo backend."""
import json

import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from browser_util import app_server

SAMPLE = "sad_01"


@pytest.fixture(scope="module")
def client():
    with app_server() as url:
        yield Client(url, verbose=False)


def test_named_endpoints_exist(client):
    names = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    assert {"/run", "/run_stream", "/batch"} <= set(names)


def test_endpoints_keep_the_defaults_of_the_widgets_they_replaced(client):
    """Issue 47: declared with gr.api, a client may still leave out what had a default."""
    api = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    run = {p["parameter_name"]: p for p in api["/run"]["parameters"]}
    assert list(run) == ["sample", "audio", "config_json", "backend_name", "baseline"]
    assert run["backend_name"]["parameter_default"] == "demo" and run["baseline"]["parameter_default"] is False
    assert [p["parameter_name"] for p in api["/batch"]["parameters"]][2:5] == ["limit", "manifest", "clips"]
    res, text = client.predict(SAMPLE, config_json=json.dumps({"max_new_tokens": 8}), api_name="/run")
    assert res["ok"] and text == res["text"] and "baseline" not in res


def test_sample_clip_returns_a_trace(client):
    res, text = client.predict(SAMPLE, None, json.dumps({"max_new_tokens": 48}), "demo", True,
                               api_name="/run")
    assert res["ok"] and res["audio"] == SAMPLE
    trace = res["trace"]
    assert trace["tokens"] and text == res["text"] == trace["text"]
    assert {t["source"] for t in trace["tokens"]} <= {"accepted", "corrected", "draft", "bonus"}
    assert trace["config"]["max_new_tokens"] == 48 and len(trace["tokens"]) <= 48
    assert trace["metrics"]["ended_by"] in ("eos", "sentence", "max_tokens", "cycle")
    # classic greedy speculative decoding is lossless: same tokens as the cloud model alone
    assert res["baseline"]["token_ids"] == res["token_ids"]


def test_stream_yields_intermediate_updates(client):
    job = client.submit(SAMPLE, None, json.dumps({"k": 2, "max_new_tokens": 40}), "demo", False,
                        api_name="/run_stream")
    outs = [res for res, _text in job]
    partial = [o for o in outs if not o["done"]]
    assert len(partial) > 1
    counts = [o["n_tokens"] for o in partial]
    assert counts == sorted(counts) and counts[0] < counts[-1]
    final = outs[-1]
    assert final["done"] and final["ok"] and len(final["trace"]["tokens"]) >= counts[-1]


def test_bad_upload_is_a_one_line_error_and_the_next_call_works(client, tmp_path):
    bad = tmp_path / "not_audio.wav"
    bad.write_text("this is a text file, not a WAV")
    with pytest.raises(AppError) as err:
        client.predict("", handle_file(str(bad)), "", "demo", False, api_name="/run")
    msg = str(err.value)
    assert "not_audio.wav" in msg and "\n" not in msg.strip()
    res, text = client.predict(SAMPLE, None, "", "demo", False, api_name="/run")
    assert res["ok"] and text


@pytest.mark.parametrize("config, words", [
    ({"k": 0}, ["k", "[1, 32]"]),
    ({"verify": "maybe"}, ["verify", "greedy"]),
    ({"temperature": "hot"}, ["temperature"]),
    ({"nope": 1}, ["unknown knob", "nope"]),
    ({"faults": ["gremlins"]}, ["unknown fault", "gremlins"]),
])
def test_bad_knob_value_is_a_clear_error(client, config, words):
    with pytest.raises(AppError) as err:
        client.predict(SAMPLE, None, json.dumps(config), "demo", False, api_name="/run")
    msg = str(err.value)
    assert all(w in msg for w in words) and "\n" not in msg.strip()


def test_unknown_sample_name_is_refused(client):
    with pytest.raises(AppError, match="unknown sample"):
        client.predict("../../etc/passwd", None, "", "demo", False, api_name="/run")


def test_batch_endpoint_runs_the_bundled_manifest(client):
    out = client.predict(json.dumps({"max_new_tokens": 24}), "", 2, None, [], "demo", api_name="/batch")
    assert out["summary"]["A"]["n"] == 2 and len(out["rows"]) == 2
    assert all(r["ok"] for r in out["rows"])
    names = [c["name"] for c in out["checklist"]["A"]]
    assert any("acceptance" in n for n in names)
