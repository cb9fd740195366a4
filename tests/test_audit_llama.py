"""Auditing llama.cpp's llama-server (docs/audit.md, "What each engine sends"), the second
engine `audit --url` reads, on real servers built from source (`make cloud-llama`): the demo
cloud with the demo edge as its 4-token draft model (clean), with the demo cloud itself as
its drafter while the edge is declared (a mismatched drafter), and with no draft model. Bad
input: a server of neither kind, a server that wants an API key (401 to everything the audit
reads), a server that dies mid-request. Small requests, one start per server for the module."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from llama_server import LlamaServer, build_llama
from specdec_core.api import prepare
from specdec_core.audit import audit, checks
from specdec_core.backends import load_backend
from specdec_core.backends.openai_client import RemoteError
from specdec_core.decoding.config import DecodeConfig

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "specdec_core" / "demo" / "models"
EDGE, CLOUD = str(MODELS / "edge"), str(MODELS / "cloud")
CLIPS = [str(ROOT / "sample_audio" / f"{n}.wav") for n in ("angry_01", "happy_01")]

pytestmark = [pytest.mark.cloud, pytest.mark.timeout(4800)]


@pytest.fixture(scope="module")
def servers(artifacts):
    """The servers side by side (each start is a second or two once built)."""
    build_llama()
    srvs = {"clean": LlamaServer(artifacts, extra="--metrics"), "other": LlamaServer(artifacts, CLOUD),
            "plain": LlamaServer(artifacts, "none"), "keyed": LlamaServer(artifacts, "none", "--api-key sekret"),
            "ngram": LlamaServer(artifacts, "none", "--spec-type ngram-simple --spec-ngram-simple-size-n 2 "
                                 "--spec-ngram-simple-size-m 4 --spec-draft-n-max 4")}
    try:
        for name, srv in srvs.items():
            srv.start()
            print(f"cloud-llama ({name}) ready in {srv.start_s[-1]:.0f} s at {srv.url}")
        yield srvs
    finally:
        for srv in srvs.values():
            srv.stop()


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


@pytest.fixture(scope="module")
def inputs(demo):
    return [(Path(c).name, prepare(demo, c, DecodeConfig()).input_ids[0].tolist()) for c in CLIPS]


@pytest.fixture
def cli(capsys):
    """`python -m specdec_core audit ARGS` in this process: (exit code, stdout, stderr)."""
    from specdec_core.cli import main

    def run(*args):
        code = main(["audit", *args])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)
    return run


def codes(rep, *severities):
    return sorted(f["code"] for f in rep["findings"] if not severities or f["severity"] in severities)


def test_a_clean_llama_server_passes_named_with_its_steps_replayed(servers, tmp_path, cli):
    """The demo edge as the draft model, replayed here: the steps rebuilt from the replay add
    up to the engine's own totals exactly, the output is the reference's, nothing to report;
    the engine is named with its build."""
    out = tmp_path / "a.json"
    p = cli("--url", servers["clean"].url, *CLIPS, "--max-tokens", "16", "--replay", EDGE,
            "--fail-on", "warning", "--out", str(out))
    assert p.returncode == 0, p.stderr[-2000:]
    rep = json.loads(out.read_text())
    eng = rep["engine"]
    assert eng["kind"] == "llama.cpp" and eng["version"] and eng["speculates"] is True
    assert codes(rep) == [], rep["findings"]
    for r in rep["results"]:
        spec = r["metrics"]["speculative_decoding"]
        assert r["reference"]["matches"] and len(r["token_ids"]) == 16
        assert spec["steps_from"] == "replay" and spec["num_spec_tokens"] == 4
        assert sum(spec["per_step_drafted"]) == spec["num_draft_tokens"] > 0
        assert sum(spec["per_step_accepted"]) == spec["num_accepted_draft_tokens"]
        assert len(r["steps"]) == spec["num_spec_steps"]
        # the server-wide counters (--metrics) moved by exactly this request's totals and steps
        assert spec["server_wide"] == {"drafted": spec["num_draft_tokens"], "steps": spec["num_spec_steps"],
                                       "accepted": spec["num_accepted_draft_tokens"]}, spec
    assert rep["acceptance"]["by_draft_position"][0]["drafted"] > 0
    assert "mean acceptance length 1.00" not in p.stderr and "+ 0 steps" not in p.stderr


def test_without_replay_the_totals_are_judged_and_the_rest_said_in_one_line(servers, demo, inputs):
    rep = audit(demo, servers["clean"].url, inputs[:1], max_tokens=16)
    r = rep["results"][0]
    spec = r["metrics"]["speculative_decoding"]
    assert r["reference"]["matches"] and spec["num_draft_tokens"] > 0
    assert codes(rep) == ["not_judged"], rep["findings"]
    said = rep["findings"][0]["detail"]
    assert "timings.draft_n" in said and "--replay DRAFT_DIR" in said
    assert rep["acceptance"]["by_draft_position"] == [] and r["steps"] == []
    from specdec_core.audit import summary
    assert (f"{spec['num_accepted_draft_tokens']} of {spec['num_draft_tokens']} drafts accepted (the engine's "
            "totals; no steps)") in summary(rep)


def test_an_ngram_replay_on_a_llama_draft_model_server_is_a_replay_mismatch(servers, cli):
    """As on vLLM: the n-gram rule replayed where the totals show a draft model (at least one
    draft per step, every step back to back) is said as such, in one finding and its line."""
    p = cli("--url", servers["clean"].url, CLIPS[0], "--max-tokens", "16", "--replay", "ngram", "--out", "-")
    assert p.returncode == 0, p.stderr[-2000:]
    rep = json.loads(p.stdout)
    off = [f for f in rep["findings"] if f["code"] == "replay_mismatch"]
    assert len(off) == 1 and off[0]["evidence"]["counts_show"] == "a draft model", rep["findings"]
    spec = rep["results"][0]["metrics"]["speculative_decoding"]
    assert off[0]["evidence"]["drafted"] == spec["num_draft_tokens"]
    assert ("replayed ngram: the replayed drafter (ngram) does not fit this engine: its counts show a draft "
            "model") in p.stderr


def test_a_mismatched_drafter_is_found(servers, demo, inputs):
    """The server drafts with the demo cloud itself; the audit replays the declared edge: no
    draft length gives the engine's totals from the edge's drafts. The output is still the
    reference's (a speed question, not a lossless one)."""
    rep = audit(demo, servers["other"].url, inputs[:1], replay=EDGE, max_tokens=16)
    assert rep["results"][0]["reference"]["matches"]
    off = [f for f in rep["findings"] if f["code"] == "replay_mismatch"]
    assert len(off) == 1 and off[0]["severity"] == "warning", rep["findings"]
    assert off[0]["evidence"]["counts_show"].startswith("another draft model: no draft length"), off
    spec = rep["results"][0]["metrics"]["speculative_decoding"]
    assert off[0]["evidence"]["accepted"] == spec["num_accepted_draft_tokens"] > 0
    assert "lossless_violation" not in codes(rep)


def test_a_server_without_a_draft_model_is_inconclusive_never_a_pass(servers, tmp_path, cli):
    out = tmp_path / "plain.json"
    p = cli("--url", servers["plain"].url, CLIPS[0], "--max-tokens", "8", "--fail-on", "warning",
            "--out", str(out))
    assert p.returncode == 1, p.stderr[-2000:]
    rep = json.loads(out.read_text())
    assert codes(rep) == ["spec_never_drafted"] and rep["engine"]["speculates"] is False
    assert rep["results"][0]["reference"]["matches"]


def test_a_replay_that_does_not_fit_a_llama_ngram_server_says_the_kind_its_totals_show(servers, demo, inputs):
    """llama-server's own n-gram rule (ngram-simple) drafts only where it matches: fewer drafts
    than output tokens left after the accepted ones. Replaying a draft model there is said as
    "an n-gram rule"; replaying vLLM's n-gram rule, as another n-gram rule."""
    for replay, shows in ((EDGE, "an n-gram rule"), ("ngram", "another n-gram rule: no draft length")):
        rep = audit(demo, servers["ngram"].url, inputs, replay=replay, max_tokens=48)
        drafted = [r["audio"] for r in rep["results"] if r["metrics"]["speculative_decoding"]["num_draft_tokens"]]
        off = {f["evidence"]["request"]: f["evidence"]["counts_show"] for f in rep["findings"]
               if f["code"] == "replay_mismatch"}
        assert drafted and sorted(off) == sorted(drafted), rep["findings"]
        assert all(s.startswith(shows) for s in off.values()), off
        assert all(r["reference"]["matches"] for r in rep["results"])


def test_two_llama_servers_side_by_side_say_llamas_definitions(servers, cli):
    """--compare-url with llama-server on both sides (with and without a draft model): the same
    greedy output, and llama.cpp's definitions said once."""
    p = cli("--url", servers["clean"].url, "--compare-url", servers["plain"].url, CLIPS[0], "--max-tokens", "8",
            "--out", "-")
    assert p.returncode == 0, p.stderr[-2000:]
    cmp = json.loads(p.stdout)["comparison"]
    assert [r["same"] for r in cmp["requests"]] == [True], cmp
    assert len(cmp["definitions"]) == 1 and "timings.draft_n" in cmp["definitions"][0], cmp["definitions"]
    assert "Same output" in p.stderr


def test_counters_that_do_not_add_up_are_found_on_a_real_reply(servers, inputs):
    """llama-server's totals held to what they must satisfy: accepted <= drafted, and every
    accepted draft an output token after the prefill's. No real server breaks them on demand:
    a real reply is checked as it came (whole), then with a counter inflated."""
    from specdec_core.audit.served import Engine

    eng = Engine(servers["clean"].url)
    try:
        served = eng.complete(inputs[0][1], 16)
    finally:
        eng.close()
    assert served.spec["num_draft_tokens"] > 0 and served.finish == "length"
    assert checks.counters(checks.Run("x", served)) == []
    real = served.spec      # a reply claiming more drafts than the server-wide counters (--metrics) moved by
    assert real["server_wide"]["drafted"] == real["num_draft_tokens"], real
    served.spec = dict(real, num_draft_tokens=real["num_draft_tokens"] + 4)
    bad = checks.counters(checks.Run("x", served))
    assert [f["code"] for f in bad] == ["spec_counters"], bad
    assert bad[0]["evidence"]["broken"] == [f"the server-wide drafted count (/metrics) moved by {real['num_draft_tokens']}"
                                            f" over this request of {served.spec['num_draft_tokens']}"]
    served.spec = dict(served.spec, num_accepted_draft_tokens=served.spec["num_draft_tokens"] + 1)
    bad = checks.counters(checks.Run("x", served))
    assert [f["code"] for f in bad] == ["spec_counters"] and "drafted" in bad[0]["detail"]
    served.spec = dict(served.spec, num_draft_tokens=100, num_accepted_draft_tokens=40)
    assert "shorter than 1 + 40 accepted" in checks.counters(checks.Run("x", served))[0]["detail"]


def one_line(p, *words):
    assert p.returncode == 2, (p.returncode, p.stderr[-2000:])
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert all(w in lines[0] for w in words), lines[0]


def test_a_server_of_neither_kind_is_one_line(demo, cli):
    """An OpenAI-compatible server that answers neither vLLM's /version nor llama-server's
    /props (a real decoder behind a stub) is refused before any completion."""
    from openai_stub import OpenAIStub

    with OpenAIStub(demo.cloud, demo.tokenizer, version=None) as stub:
        one_line(cli("--url", stub.url, CLIPS[0]), stub.url, "neither kind", "nothing was judged")
        assert "/v1/completions" not in stub.paths


def test_a_llama_server_that_wants_an_api_key_is_one_line_and_nothing_else_lost(servers, cli):
    """llama-server with --api-key answers 401 to all the audit reads (/v1/models, /props,
    /completion; only /health is open): one line naming it, before anything is loaded, also as
    the second engine; the first engine still audits."""
    keyed = servers["keyed"].url
    one_line(cli("--url", keyed, CLIPS[0]), keyed, "HTTP 401", "credentials", "nothing was judged")
    one_line(cli("--url", servers["plain"].url, "--compare-url", keyed, CLIPS[0]), keyed, "HTTP 401")
    p = cli("--url", servers["plain"].url, CLIPS[0], "--max-tokens", "4", "--out", "-")
    assert p.returncode == 0 and json.loads(p.stdout)["results"][0]["reference"]["matches"], p.stderr[-2000:]


def test_a_server_that_dies_mid_request_is_one_line_and_nothing_else_lost(artifacts, servers, inputs, demo):
    """A llama-server frozen (SIGSTOP) with the completion request in flight, then killed: one
    line; the other servers audit on."""
    from specdec_core.audit.served import Engine

    doomed = LlamaServer(artifacts)
    doomed.start()
    try:
        eng = Engine(doomed.url)
        os.killpg(doomed.proc.pid, signal.SIGSTOP)
        got = {}

        def ask():
            try:
                eng.complete(inputs[0][1], 16)
            except RemoteError as e:
                got["error"] = str(e)
        t = threading.Thread(target=ask)
        t.start()
        time.sleep(1.0)
        doomed.kill()
        t.join(60)
        assert not t.is_alive() and "\n" not in got["error"], got
        # the client retries a dropped kept-alive connection once, on a fresh one: refused
        assert doomed.url in got["error"] and ("closed the connection" in got["error"]
                                               or "not reachable" in got["error"]), got
    finally:
        doomed.kill()
    rep = audit(demo, servers["clean"].url, inputs[:1], max_tokens=8)
    assert rep["results"][0]["reference"]["matches"]
