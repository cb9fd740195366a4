"""Auditing a served engine (docs/audit.md) against real vLLM servers running their own
speculative decoding on the demo pair (`make cloud-spec`): a draft-model server whose drafter is
the demo edge with its window cut to 72 positions (clean below it, a defect past it), and an
n-gram server. Bad input: a server that is down, a real decoder behind HTTP that sends no
speculative metrics, n > 1. Small requests, one start per server for the module."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cloud_server import free_port, shared_dir, shared_server
from specdec_core.api import prepare
from specdec_core.audit import audit, checks
from specdec_core.backends import load_backend
from specdec_core.decoding.config import DecodeConfig

ROOT = Path(__file__).resolve().parents[1]
CLIPS = [str(ROOT / "sample_audio" / f"{n}.wav") for n in ("angry_01", "happy_01")]
WINDOW = 72           # the drafter's max_position_embeddings; the demo prompts are 54 tokens
K = 4                 # the served drafter's k (make cloud-spec)

pytestmark = [pytest.mark.cloud, pytest.mark.timeout(2400)]


@pytest.fixture(scope="module")
def drafter():
    """The demo edge with a window shorter than the contexts it will be asked to draft for
    (one folder per test run, shared with the draft-model server that serves it)."""
    def build(d):
        shutil.copytree(ROOT / "specdec_core" / "demo" / "models" / "edge", d)
        cfg = json.loads((d / "config.json").read_text())
        cfg["max_position_embeddings"] = WINDOW
        (d / "config.json").write_text(json.dumps(cfg))
    return shared_dir("edge72", build)


@pytest.fixture(scope="module")
def servers(drafter):
    """Both servers, started side by side (a start is mostly waiting: the suite's time), once
    per test run: tests/test_served_ab.py and any worker get the same two (cloud_server.py)."""
    from concurrent.futures import ThreadPoolExecutor

    args = {"draft": ("cloud-spec", "SPEC=draft", f"SPEC_DRAFT={drafter}"),
            "ngram": ("cloud-spec", "SPEC=ngram")}
    with ThreadPoolExecutor(2) as ex:
        srvs = dict(zip(args, ex.map(lambda kv: shared_server(*kv), args.items())))
    return srvs


@pytest.fixture(scope="module")
def draft(servers):
    return servers["draft"]


@pytest.fixture(scope="module")
def ngram(servers):
    return servers["ngram"]


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


@pytest.fixture(scope="module")
def inputs(demo):
    return [(Path(c).name, prepare(demo, c, DecodeConfig()).input_ids[0].tolist()) for c in CLIPS]


@pytest.fixture
def cli(capsys):
    """`python -m specdec_core audit ARGS` in this process (the demo backend is loaded once):
    (exit code, stdout, stderr)."""
    from specdec_core.cli import main

    def run(*args):
        code = main(["audit", *args])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)
    return run


def codes(rep, *severities):
    return sorted(f["code"] for f in rep["findings"] if not severities or f["severity"] in severities)


def test_a_clean_served_run_passes_and_reads_like_a_run(draft, drafter, tmp_path, cli):
    """Inside the drafter's window (54 + 12 tokens < 72): lossless, counters whole, every
    replayed decision the engine's, nothing to report; the trace's rounds are the steps."""
    out = tmp_path / "a.json"
    p = cli("--url", draft.url, *CLIPS, "--max-tokens", "12", "--replay", str(drafter),
            "--fail-on", "warning", "--out", str(out))
    assert p.returncode == 0, p.stderr[-2000:]
    rep = json.loads(out.read_text())
    assert codes(rep) == [] and rep["engine"]["speculates"] is True
    for r in rep["results"]:
        spec = r["metrics"]["speculative_decoding"]
        assert r["reference"]["matches"] and len(r["token_ids"]) == 12
        assert spec["num_draft_tokens"] > 0 and spec["per_step_drafted"] == [4] * spec["num_spec_steps"]
        rounds = r["trace"]["rounds"]
        assert [x["accepted"] for x in rounds[1:]][:-1] == spec["per_step_accepted"][:-1]
        assert [x["start"] for x in rounds[1:]] == [s["context"] - 54 for s in r["steps"]]
        srcs = [t["source"] for t in r["trace"]["tokens"]]
        # the prompt pass's token is the prefill's, not a step's bonus (issue 58.2)
        assert srcs[0] == "prefill" and srcs.count("prefill") == 1
        assert srcs.count("accepted") + srcs.count("bonus") + srcs.count("corrected") == 11
    assert rep["acceptance"]["by_draft_position"][0]["rate"] > 0.5


def test_a_drafter_window_shorter_than_the_context_is_found(draft, drafter, inputs, demo):
    """Past 72 positions the engine keeps drafting with a drafter outside its window: acceptance
    drops to 0 at the window (named from the folder), and the replayed drafter would have
    accepted there. The output stays lossless: the verifier rejects the dummy drafts."""
    rep = audit(demo, draft.url, inputs, replay=str(drafter), max_tokens=40)
    assert all(r["reference"]["matches"] for r in rep["results"])
    # one code for loops and engines (issue 57.1); the old name kept as the evidence's alias
    cliff = next(f for f in rep["findings"] if f["code"] == "acceptance_collapse")
    ev = cliff["evidence"]
    assert ev["alias"] == "acceptance_cliff" and "acceptance_cliff" not in codes(rep)
    assert ev["window"] == WINDOW and WINDOW - 5 <= ev["position"] <= WINDOW + 2, ev
    # the sustained change point: within k of window - k - 1, the arithmetic said
    k = K
    assert abs(ev["position"] - (WINDOW - k - 1)) <= k, ev
    assert ev["window_arithmetic"] == f"{WINDOW} - {k} - 1 = {WINDOW - k - 1}"
    assert f"max_position_embeddings {WINDOW}" in cliff["title"] and ev["window_arithmetic"] in cliff["title"]
    assert ev["rate_after"] == 0.0 and ev["rate_before"] > 0.5 and ev["drafts_wasted"] > 40
    off = [f for f in rep["findings"] if f["code"] == "replay_mismatch"]
    # lossless output: the other drafter costs speed (a warning with its cost), not an error
    assert len(off) == 2 and all(f["severity"] == "warning" for f in off)
    assert all(f["evidence"]["tokens_lost"] > 0 for f in off)
    for f in off:
        first = f["evidence"]["steps"][0]
        assert first["engine"] == 0 and first["replayed"] > 0 and first["context"] >= WINDOW - 4
    # without the folder: the cliff is still found, the window cannot be named
    plain = checks.collapse(rep["acceptance"]["by_context"])
    assert plain and "max_position_embeddings" not in plain[0]["title"]


def test_fail_on_warning_exits_1_on_the_defect(draft, drafter, cli):
    p = cli("--url", draft.url, CLIPS[0], "--max-tokens", "30", "--replay", str(drafter),
            "--fail-on", "warning", "--out", "-")
    assert p.returncode == 1, p.stderr[-2000:]
    assert "--fail-on warning:" in p.stderr and "replay_mismatch" in p.stderr
    assert json.loads(p.stdout)["findings"]


def test_the_summary_reads_like_runs_and_json_only_with_out(draft, drafter, cli):
    """Issue 58.5: no JSON on stdout without --out; per request the tokens and why it stopped,
    the steps, the mean acceptance length, the verdict against the reference, a findings line;
    with --replay a line of what the replay judged; no "Loading weights" bar."""
    plain = cli("--url", draft.url, CLIPS[0], "--max-tokens", "12")
    assert plain.returncode == 0 and plain.stdout == "", plain.stdout[:300]
    err = plain.stderr
    # the engine's counters include drafts accepted past the cut: said with the figure the tokens shown give
    assert re.search(r"12 tokens \(finish: length\) · 1 from the prompt pass \+ \d+ steps · mean acceptance length "
                     r"\d\.\d\d( \(the engine counts \d+ accepted drafts, \d+ past the 12-token cut; the \d+ shown: "
                     r"1 \+ \d+/\d+ = \d\.\d\d\))? · same as the reference", err), err
    assert "audit: No findings in what a served engine shows" in err and "not visible" in err
    assert "(no JSON written: --out FILE, or --out - for stdout)" in err and "Loading weights" not in err
    replayed = cli("--url", draft.url, CLIPS[0], "--max-tokens", "12", "--replay", str(drafter))
    assert replayed.stdout == "" and "Loading weights" not in replayed.stderr
    assert re.search(rf"replayed {re.escape(str(drafter))}: \d+ steps re-judged", replayed.stderr), replayed.stderr
    assert "replayed" not in err


def test_an_ngram_replay_on_a_draft_model_server_is_a_replay_mismatch(draft, cli):
    """Issue 58.1: the engine drafted k tokens at every step, as a draft model does: the n-gram
    rule replayed does not fit it, said as such (not advice to do what was done); its steps are
    still placed and acceptance by context judged."""
    p = cli("--url", draft.url, CLIPS[0], "--max-tokens", "24", "--replay", "ngram", "--out", "-")
    rep = json.loads(p.stdout)
    off = [f for f in rep["findings"] if f["code"] == "replay_mismatch"]
    assert len(off) == 1 and off[0]["evidence"]["counts_show"] == "a draft model", rep["findings"]
    assert "does not fit this engine" in off[0]["title"] and "draft model" in off[0]["title"]
    assert not any("--replay ngram" in f["detail"] for f in rep["findings"])
    assert rep["results"][0]["steps"] and rep["acceptance"]["by_context"]
    assert "replayed ngram: the replayed drafter (ngram) does not fit" in p.stderr


def test_two_engines_side_by_side(draft, ngram, cli):
    """Issue 57.3: a draft-model server and an n-gram server on the same prompt: the same greedy
    output (A matches B and the reference), each side's acceptance by draft position, and the
    definitions each engine's figures use, before any difference is called one in behaviour."""
    p = cli("--url", draft.url, "--compare-url", ngram.url, CLIPS[0], "--max-tokens", "16", "--out", "-")
    assert p.returncode == 0, p.stderr[-2000:]
    rep = json.loads(p.stdout)
    cmp = rep["comparison"]
    assert cmp["engines"] == [draft.url, ngram.url] and rep["compared_with"]["engine"]["url"] == ngram.url
    assert cmp["requests"][0]["same"] and "Same output: A and B give the same 16 tokens" in cmp["requests"][0]["verdict"]
    a_pos, b_pos = cmp["by_draft_position"]
    assert [x["position"] for x in a_pos] == [1, 2, 3, 4] and a_pos != b_pos
    assert any("counts the step's own target token" in d or "1 + accepted drafts / steps" in d for d in cmp["definitions"])
    assert f"A: {draft.url}" in p.stderr and f"B: {ngram.url}" in p.stderr and "Same output" in p.stderr


def test_vllm_and_llama_cpp_with_the_same_drafter_side_by_side(draft, drafter, artifacts, cli, capsys):
    """Issue 57.3 across engines: vLLM (the draft-model server) and llama.cpp's llama-server with
    the same drafter folder on the same prompt. The outputs are compared token by token against
    each other and the reference, each side's acceptance by draft position is shown, and both
    engines' definitions are said (vLLM's and llama.cpp's counters mean different things)."""
    if subprocess.run([str(ROOT / "scripts" / "cloud" / "llama.sh"), "ready"]).returncode:
        pytest.skip("llama-server is not built on this machine yet (make cloud-llama builds it once)")
    from llama_server import LlamaServer, build_llama

    build_llama()
    llama = LlamaServer(artifacts, drafter)
    llama.start()
    capsys.readouterr()         # the build's and the start's lines, not the audit's output
    try:
        p = cli("--url", draft.url, "--compare-url", llama.url, CLIPS[0], "--max-tokens", "12", "--out", "-")
    finally:
        llama.stop()
    assert p.returncode == 0, p.stderr[-2000:]
    rep = json.loads(p.stdout)
    cmp = rep["comparison"]
    assert (rep["engine"].get("kind") or "vllm") == "vllm", rep["engine"]
    assert rep["compared_with"]["engine"]["kind"] == "llama.cpp", rep["compared_with"]
    req = cmp["requests"][0]
    assert req["same"], req      # greedy on the same weights inside the drafter's window: one output
    assert "Same output" in req["verdict"] and rep["results"][0]["reference"]["matches"]
    a_pos, b_pos = cmp["by_draft_position"]
    assert [x["position"] for x in a_pos] == [1, 2, 3, 4] and sum(x["drafted"] for x in a_pos) > 0
    assert len(cmp["definitions"]) == 2, cmp["definitions"]
    assert any("timings.draft_n" in d for d in cmp["definitions"]), cmp["definitions"]
    assert f"A: {draft.url}" in p.stderr and f"B: {llama.url}" in p.stderr


def test_ngram_replay_places_every_step_and_agrees(ngram, inputs, demo):
    """vLLM's n-gram rule replayed here proposes exactly what the engine drafted: every step
    placed in the output, no decision otherwise; without replay the steps cannot be placed
    (an n-gram engine does not draft everywhere) and that is said."""
    rep = audit(demo, ngram.url, inputs[:1], replay="ngram", max_tokens=24)
    assert codes(rep, "error", "warning") == [], rep["findings"]
    r = rep["results"][0]
    assert r["reference"]["matches"] and len(r["steps"]) == r["metrics"]["speculative_decoding"]["num_spec_steps"]
    rep = audit(demo, ngram.url, inputs[:1], max_tokens=24)
    said = [f for f in rep["findings"] if f["code"] == "not_judged"]
    assert len(said) == 1 and "--replay ngram" in said[0]["detail"]


def test_n_above_1_is_refused_in_one_line_before_any_request(cli):
    """vLLM refuses n > 1 at temperature 0 and sends metrics for n = 1 only: refused here."""
    p = cli("--url", f"http://127.0.0.1:{free_port()}", CLIPS[0], "-n", "2")
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "n = 2" in lines[0] and "nothing was judged" in lines[0], p.stderr


def test_counters_are_held_to_their_identities(draft, inputs, demo):
    """The engine's real counters pass; the same reply with a counter zeroed or inflated fails."""
    from specdec_core.audit.served import Engine

    eng = Engine(draft.url)
    try:
        served = eng.complete(inputs[0][1], 16)
    finally:
        eng.close()
    run = checks.Run("angry", served)
    assert checks.counters(run) == []
    served.spec = dict(served.spec, num_accepted_draft_tokens=0)
    bad = checks.counters(run)
    assert [f["code"] for f in bad] == ["spec_counters"] and "Σ j·h[j]" in bad[0]["detail"]
    served.spec = dict(served.spec, num_accepted_draft_tokens=sum(served.spec["per_step_accepted"]),
                       per_step_accepted=[a + 1 for a in served.spec["per_step_accepted"]])
    assert "Σ per-step accepted" in checks.counters(run)[0]["detail"]


def test_a_server_that_is_down_is_one_line_and_exit_2(cli):
    url = f"http://127.0.0.1:{free_port()}"
    p = cli("--url", url, CLIPS[0])
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert url in lines[0] and "not reachable" in lines[0] and "nothing was judged" in lines[0]


def test_an_engine_without_speculative_metrics_is_said_and_its_output_judged(demo, inputs):
    """A real decoder (the demo cloud) behind HTTP that sends no `metrics` (an older vLLM, or
    the flag off): one line saying what is not judged; the output is still checked."""
    from openai_stub import OpenAIStub

    with OpenAIStub(demo.cloud, demo.tokenizer) as stub:
        rep = audit(demo, stub.url, inputs[:1], max_tokens=8)
    assert codes(rep) == ["not_judged"] and rep["engine"]["speculates"] is None
    said = rep["findings"][0]
    assert said["severity"] == "warning" and "--per-request-spec-decode-metrics detailed" in said["detail"]
    assert "acceptance and counters are not" in said["detail"]
    assert rep["results"][0]["reference"]["matches"]


def test_a_server_running_another_model_is_a_confident_divergence(demo, inputs):
    """The engine's greedy output leaves the reference where the reference was sure: a
    lossless_violation with the reference's top-2 margin as evidence."""
    from openai_stub import OpenAIStub

    with OpenAIStub(demo.edge, demo.tokenizer) as stub:
        rep = audit(demo, stub.url, inputs[:1], max_tokens=16)
    bad = [f for f in rep["findings"] if f["code"] == "lossless_violation"]
    assert len(bad) == 1, rep["findings"]
    ev = bad[0]["evidence"]
    assert ev["served"] != ev["reference"] and ev["margin_reference"] > ev["tolerance"]


def test_a_near_tie_flip_is_numerics_not_a_violation():
    from specdec_core.audit.served import Served

    top = [{5: -0.1, 6: -3.0}, {7: -0.693100, 8: -0.693170}]
    served = Served([1], [5, 7], top, None)
    near = checks.Run("x", served, [5, 8], [{5: -0.1, 6: -3.0}, {8: -0.693120, 7: -0.693150}])
    assert [f["code"] for f in checks.divergence(near)] == ["numeric_divergence"]
    far = checks.Run("x", served, [5, 8], [{5: -0.1, 6: -3.0}, {8: -0.1, 7: -2.5}])
    f = checks.divergence(far)
    assert [x["code"] for x in f] == ["lossless_violation"] and f[0]["evidence"]["margin_reference"] == 2.4


def test_the_live_tab_audits_a_listed_engine_and_refuses_others(draft, monkeypatch):
    """The page's served engine source (ui/served.py), through its handler: a server on the
    operator's list is audited (replaying the backend's own edge, whose window is 512: past
    the served drafter's 72 the replay disagrees); one off the list is refused before any
    connection."""
    from openai_stub import Listener

    from ui import served

    monkeypatch.setenv("SPECSCOPE_CLOUD_URLS", draft.url)
    status, tokens, fig, found, *_ = served.run("angry_01", None, "demo", draft.url, served.REPLAY[2])
    assert "Audited angry_01" in status and "same as the reference" in status
    assert "ss-tokens" in tokens and "rejected" in tokens
    assert "replay_mismatch" in found or "accepted a count the exact greedy rule" in found
    assert "acceptance collapses past context position" in found
    assert [t.type for t in fig.data] == ["bar", "scatter"] and fig.layout.shapes
    with Listener() as other:
        status, *_ = served.run("angry_01", None, "demo", other.url, "none")
        assert "Could not audit" in status and other.accepted == 0


def test_a_second_server_can_be_the_reference(draft, demo, inputs):
    """--reference URL: the same model behind another server (a real decoder over HTTP)."""
    from openai_stub import OpenAIStub

    with OpenAIStub(demo.cloud, demo.tokenizer) as ref:
        rep = audit(demo, draft.url, inputs[:1], reference=ref.url, max_tokens=10)
    assert codes(rep) == [] and rep["results"][0]["reference"]["matches"]


@pytest.mark.parametrize("stream", ["usage", "no-usage"])
def test_a_streamed_audit_reads_the_usage_chunk_or_says_it_is_missing(draft, demo, inputs, stream):
    """Streamed, vLLM sends the metrics on the final usage chunk only (include_usage)."""
    rep = audit(demo, draft.url, inputs[:1], max_tokens=10, stream=stream)
    r = rep["results"][0]
    assert r["reference"]["matches"] and len(r["token_ids"]) == 10
    if stream == "usage":
        assert codes(rep) == [] and r["metrics"]["speculative_decoding"]["num_spec_steps"] > 0
    else:
        assert codes(rep) == ["not_judged"] and "no usage chunk" in rep["findings"][0]["detail"]
