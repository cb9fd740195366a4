"""The cloud behind a real vLLM server (`make cloud`, the demo cloud model, float32).

One server for the module (built and started once; see cloud_server.py). The edge decodes here,
every verification is one /v1/completions request. Greedy and rank verification must be exact:
the same tokens as the local cloud, on every sample clip.
"""
from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path

import pytest

from cli_many import run_many
from cloud_server import CloudServer, build_venv
from specdec_core.api import prepare, with_cloud
from specdec_core.backends import load_backend
from specdec_core.decoding.baseline import cloud_only
from specdec_core.decoding.config import DecodeConfig
from specdec_core.decoding.decoder import SpeculativeDecoder
from specdec_core.evaluation.batch.run import iter_batch
from specdec_core.evaluation.batch.manifest import read_manifest

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = ROOT / "sample_audio" / "manifest.csv"
CLIPS = sorted(str(p) for p in (ROOT / "sample_audio").glob("*.wav"))

# The first test also builds the virtualenv on a fresh machine (`make test` builds it before
# pytest starts, so normally it is cached) and starts the server: more than the default timeout.
pytestmark = [pytest.mark.cloud, pytest.mark.timeout(2400)]
# What these tests compare is the tokens, never the time: no decode time limit (the default 60 s
# cut a clip short on a loaded machine, and a cut clip differs from cloud-only) and a request
# timeout far above a verify's on a busy CPU (the default is 30 s).
NO_LIMIT = ("--set", "time_limit_s=0")
TIMEOUT_S = 300


@pytest.fixture(scope="module")
def server(artifacts):
    build_venv()
    srv = CloudServer(artifacts)
    srv.start()
    print(f"cloud server ready in {srv.start_s[-1]:.0f} s at {srv.url}")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def local():
    return load_backend("demo")


@pytest.fixture(scope="module")
def remote(server, local):
    from specdec_core.backends.remote import RemoteCloud

    assert isinstance(with_cloud(local, server.url), RemoteCloud)
    return RemoteCloud(local, server.url, timeout=TIMEOUT_S)


@pytest.fixture(scope="module")
def prompts(local):
    clips = read_manifest(MANIFEST)
    return {Path(c.path).name: prepare(local, c.path, DecodeConfig(prompt_type=c.prompt_type or "detailed"))
            for c in clips}


@pytest.fixture(scope="module")
def want(local, prompts):
    """The local cloud decoding alone (greedy), per clip name: computed once for the module."""
    cache: dict[str, list[int]] = {}

    def get(name: str) -> list[int]:
        if name not in cache:
            cache[name] = cloud_only(local, prompts[name], DecodeConfig())["token_ids"]
        return cache[name]
    return get


@pytest.fixture(scope="module")
def cli_runs(server, tmp_path_factory):
    """The module's command lines in one CLI process (tests/cli_many.py: a process start
    costs seconds), by name; "dir": their folder. SPECSCOPE_HF_CLOUD is read by the hf backend
    only (the vocabulary case)."""
    from tiny import char_tokenizer, tiny_qwen2

    d = tmp_path_factory.mktemp("cli")
    tok = char_tokenizer()
    for name in ("edge", "cloud"):
        tiny_qwen2(len(tok), hidden=32, layers=1, seed=1).save_pretrained(d / name)
        tok.save_pretrained(d / name)
    cases = {"greedy": ["run", *CLIPS, "--cloud-url", server.url, "--baseline", *NO_LIMIT, "--out", d / "r.json"],
             "sampling": ["run", CLIPS[0], "--cloud-url", server.url, "--set", "verify=sampling",
                          "--set", "temperature=0.8"],
             "vocabulary": ["run", "--backend", "hf", "--edge-model", d / "edge", "--prompt", "说话",
                            "--cloud-url", server.url],
             "model": ["run", CLIPS[0], "--cloud-url", server.url, "--cloud-model", "qwen-7b"],
             # (last: the only one that starts a Ray)
             "batch": ["batch", MANIFEST, "--cloud-url", server.url, "--workers", "2", "--limit", "2",
                       *NO_LIMIT, "--out", d / "batch"]}
    env = {"SPECSCOPE_CLOUD_TIMEOUT": str(TIMEOUT_S), **os.environ, "SPECSCOPE_HF_CLOUD": str(d / "cloud")}
    return dict(zip(cases, run_many(cases.values(), env=env, timeout=1800)), dir=d)


def decode(backend, prompt, **knobs):
    cfg = DecodeConfig(cache_check_every=0, time_limit_s=0, **knobs)
    return SpeculativeDecoder(backend, cfg, debug=True).run(prompt)


def test_make_cloud_serves_the_demo_cloud(server, remote):
    assert len(CLIPS) == 18
    assert remote.model.endswith("demo/models/cloud")
    assert remote.max_model_len == 512


def test_greedy_with_the_remote_cloud_equals_local_cloud_only_on_every_clip(cli_runs):
    """Through the CLI: `run --cloud-url --baseline` on all 18 clips; the baseline is the local
    cloud model decoding alone (HF generate, greedy, float32)."""
    out = cli_runs["dir"] / "r.json"
    p = cli_runs["greedy"]
    assert p.returncode == 0, p.stderr[-2000:]
    res = json.loads(out.read_text())["results"]
    assert len(res) == 18 and all(r["ok"] for r in res), [r.get("error") for r in res if not r["ok"]]
    differ = [(r["audio"], r["metrics"].get("ended_by")) for r in res
              if r["token_ids"] != r["baseline"]["token_ids"]]
    assert not differ, f"remote greedy SD differs from local cloud-only on (clip, ended_by) {differ}"
    for r in res:
        m, rounds = r["metrics"], r["trace"]["rounds"]
        assert m["link"] == "measured" and m["uplink_calls"] == m["cloud_calls"] == m["target_forwards"]
        called = [x for x in rounds if x["verified"]]
        assert all(x["request_s"] > 0 and x["bytes_up"] > 0 and x["bytes_down"] > 0 for x in called)
        assert m["bytes_up"] == sum(x["bytes_up"] for x in called)
        assert m["request_ms_mean"] > 0 and m["ttft_s"] > 0


def test_the_server_takes_no_cpu_between_requests(server, remote, prompts):
    """An edge drafts between two verifications: the server must leave the cores to it. vLLM's
    CPU worker process busy-waits a second after every step (held a whole core for the whole of
    a decode: 19.2 s of server CPU against 2.9 s over 18 clips, the client 21.3 s against 11.2 s);
    cloud.sh runs the model in the engine's own process. CPU seconds, not time: the server's
    processes used at most 0.15 s of CPU in the second after a request (0.01 s measured; a
    busy-waiting worker takes what the machine gives it, ~1 s of a free core)."""
    p = prompts["angry_01.wav"].input_ids[0].tolist()
    for _ in range(3):          # (3 tries: a periodic stats line may fall into one second)
        body = json.dumps({"model": remote.model, "prompt": p, "max_tokens": 1}).encode()
        req = urllib.request.Request(f"{server.url}/v1/completions", body, {"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=TIMEOUT_S).read()
        c0 = server.cpu_s()
        time.sleep(1.0)
        used = server.cpu_s() - c0
        if used <= 0.15:
            break
    print(f"server CPU in the second after a request: {used:.3f} s")
    assert used <= 0.15, f"the server used {used:.2f} CPU s in the second after a request"


def test_remote_trace_matches_the_local_trace(remote, local, prompts):
    """Not just the tokens: the cloud's rank and probability of every checked draft token and of
    every correction/bonus token agree with the cloud in this process."""
    for name in list(prompts)[:6]:
        a, b = decode(local, prompts[name]), decode(remote, prompts[name])
        assert a.token_ids == b.token_ids, name
        assert [r.accepted for r in a.rounds] == [r.accepted for r in b.rounds]
        for ta, tb in zip(a.tokens + a.rejected, b.tokens + b.rejected):
            assert (ta.source, ta.target_rank) == (tb.source, tb.target_rank), name
            if ta.target_prob is not None:
                assert tb.target_prob == pytest.approx(ta.target_prob, abs=1e-4)


@pytest.mark.parametrize("knobs", [{"verify": "rank", "rank_threshold": 3},
                                   {"verify": "rank", "rank_threshold": 8, "k": 6},
                                   {"verify": "rank", "rank_threshold": 2, "entropy_threshold": 1.5}])
def test_rank_verification_is_exact(remote, local, prompts, knobs):
    """Rank acceptance uses the server's rank of each drafted token (exact at any rank, not only
    inside the top-k it sends): same accept/reject decisions, same tokens, on every clip."""
    lenient = 0
    for name, p in prompts.items():
        a, b = decode(local, p, **knobs), decode(remote, p, **knobs)
        assert a.token_ids == b.token_ids, name
        assert [t.target_rank for t in a.tokens] == [t.target_rank for t in b.tokens], name
        assert [t.target_rank for t in a.rejected] == [t.target_rank for t in b.rejected], name
        lenient += sum(t.source == "accepted" and (t.target_rank or 1) > 1 for t in b.tokens)
    assert lenient > 0, "the rank rule never accepted a non-top-1 token: the test would not see a difference"


def test_entropy_gate_sends_no_request_for_uncalled_blocks(remote, local, prompts):
    p = prompts["angry_01.wav"]
    tr = decode(remote, p, entropy_threshold=1.5)
    skipped = [r for r in tr.rounds if not r.verified]
    assert skipped
    assert all(r.request_s is None and r.bytes_up == 0 for r in skipped)
    assert tr.metrics["uplink_calls"] == tr.metrics["target_forwards"] == len(tr.rounds) - len(skipped)
    assert tr.token_ids == decode(local, p, entropy_threshold=1.5).token_ids


def test_sampling_is_refused_with_one_line(cli_runs):
    p = cli_runs["sampling"]
    assert p.returncode == 2
    assert p.stderr.strip() == ("specscope: error: verify=sampling needs the cloud's full distribution, "
                                "which a remote cloud does not send; use verify=greedy or verify=rank "
                                "with --cloud-url")


def test_a_model_with_another_vocabulary_is_refused(cli_runs):
    """An edge whose tokenizer is not the served model's: the probe catches it before any run."""
    p = cli_runs["vocabulary"]
    assert p.returncode == 2, p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("specscope: error")]
    assert len(errors) == 1 and "Traceback" not in p.stderr   # (the hf loader prints progress bars)
    assert "does not share the edge's vocabulary" in errors[0]
    p = cli_runs["model"]
    assert p.returncode == 2 and "does not serve 'qwen-7b'" in p.stderr


def test_batch_workers_share_the_server(cli_runs, want):
    """(2 rows, one per worker: 4 and 6 proved no more and cost minutes on a busy machine.)"""
    p = cli_runs["batch"]
    assert p.returncode == 0, p.stderr[-2000:]
    assert "ran 2 of 2 rows (ray engine)" in p.stdout       # --workers N > 1 runs on Ray
    rows = json.loads((cli_runs["dir"] / "batch" / "results.json").read_text())["rows"]
    assert [r["name"] for r in rows] == [c.name for c in read_manifest(MANIFEST)[:2]]
    for r in rows:
        assert r["ok"] and r["metrics"]["link"] == "measured"
        assert r["token_ids"] == want(Path(r["audio"]).name), r["name"]


def test_two_cloud_urls_share_the_rows_and_one_that_dies_costs_its_row_only(server, want, tmp_path):
    """Two --cloud-url values: the server itself and a real TCP forwarder to it that dies in the
    middle of a request. Rows alternate between the two; the row in flight on the dead one fails
    with a one-line error naming it (marked retry), every later row goes to the live server, and
    a resume runs that one row again."""
    from tcp_forward import Forwarder

    from specdec_core.evaluation.batch.scale import run_batch_dir

    fwd = Forwarder(int(server.url.rsplit(":", 1)[1]), die_after=20)
    clips = read_manifest(MANIFEST)[:8]
    urls = [server.url, fwd.url]
    try:
        res, ran = run_batch_dir({"backend": "demo"}, clips, {"A": DecodeConfig(time_limit_s=0)}, tmp_path,
                                 cloud_urls=urls)
    finally:
        fwd.close()
    rows = res.rows
    assert ran == 8 and fwd.requests > 20                # it did die, mid-batch
    failed = [r for r in rows if not r["ok"]]
    assert len(failed) == 1, [r["error"] for r in failed]
    bad = failed[0]
    assert bad["cloud"] == fwd.url and fwd.url in bad["error"] and "\n" not in bad["error"]
    assert bad.get("retry") is True
    i = rows.index(bad)
    assert {r["cloud"] for r in rows[:i]} == set(urls)   # both servers took rows before
    assert all(r["ok"] and r["cloud"] == server.url for r in rows[i + 1:])
    for r in rows:
        if r["ok"]:
            assert r["token_ids"] == want(Path(r["audio"]).name), r["name"]
    res2, ran = run_batch_dir({"backend": "demo"}, clips, {"A": DecodeConfig(time_limit_s=0)}, tmp_path,
                              cloud_urls=urls, resume=True)
    assert ran == 1 and all(r["ok"] for r in res2.rows) and res2.rows[i]["cloud"] == server.url
    assert len((tmp_path / "results.jsonl").read_text().splitlines()) == 8


def test_an_engine_without_speculation_is_audited_and_says_so(server, local):
    """`audit` against this plain server (no --speculative-config): one line saying acceptance
    and counters cannot be judged; the output is still checked against the local cloud."""
    from specdec_core.audit import audit

    ids = prepare(local, CLIPS[0], DecodeConfig()).input_ids[0].tolist()
    rep = audit(local, server.url, [("angry_01", ids)], max_tokens=8)
    assert rep["engine"]["speculates"] is False and rep["results"][0]["reference"]["matches"]
    assert [(f["code"], f["title"]) for f in rep["findings"]] == [
        ("not_judged", "the engine runs no speculative decoding (no vllm:spec_decode_* counters)")]


def test_a_killed_server_fails_rows_and_the_batch_goes_on_when_it_is_back(server, local):
    """A cloud that goes down mid-batch, then comes back: rows while it is down fail with a
    one-line error naming it, the rest complete once it is back. The cloud URL is a real TCP
    forwarder to the module's server that drops every connection and stops listening (what a
    client sees of a SIGKILLed server: open connections reset, new ones refused), then listens
    again on the same port. (It SIGKILLed and restarted vLLM itself: the same client-side
    events, and a second server start, 32 s quiet and ~50 s on a busy machine.)"""
    from tcp_forward import Forwarder

    from specdec_core.backends.remote import RemoteCloud

    fwd = Forwarder(int(server.url.rsplit(":", 1)[1]))
    clips = read_manifest(MANIFEST)[:8]
    rows = []
    try:
        batch = iter_batch(RemoteCloud(local, fwd.url, timeout=TIMEOUT_S), clips,
                           {"A": DecodeConfig(time_limit_s=0)})
        for ev in batch:
            if ev["type"] == "done":
                result = ev["result"]
                break
            rows.append(ev["row"])
            if len(rows) == 2:
                fwd.close()
            if len(rows) == 4:
                fwd.reopen()
    finally:
        fwd.close()
    ok = [r["ok"] for r in rows]
    assert ok == [True, True, False, False, True, True, True, True], [r["error"] for r in rows]
    for r in rows[2:4]:
        assert "\n" not in r["error"] and fwd.url in r["error"]
        assert "not reachable" in r["error"] or "closed the connection" in r["error"]
    assert result.failed == 2 and result.summary["A"]["failed"] == 2
