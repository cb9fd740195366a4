"""The link model (U-HLM-style accounting for a local cloud) and the remote cloud's failure
messages that need no vLLM server: nothing listening, a server that never answers, bad URLs,
configurations a remote cloud cannot verify exactly."""
from __future__ import annotations

import math
import socket
import threading
from pathlib import Path

import pytest

from cli_many import run_many
from specdec_core.api import prepare, with_cloud
from specdec_core.backends import load_backend
from specdec_core.backends.openai_client import CompletionsClient, RemoteError
from specdec_core.decoding.config import DecodeConfig
from specdec_core.decoding.decoder import SpeculativeDecoder
from specdec_core.decoding.link import FRAME_BYTES, ID_BYTES, PROB_BYTES, LinkModel, uplink_bytes
from specdec_core.errors import ConfigError, UserError

ROOT = Path(__file__).resolve().parents[1]
CLIP = str(ROOT / "sample_audio" / "angry_01.wav")


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


@pytest.fixture(scope="module")
def prompt(demo):
    return prepare(demo, CLIP, DecodeConfig())


def decode(backend, prompt, **knobs):
    return SpeculativeDecoder(backend, DecodeConfig(cache_check_every=0, **knobs)).run(prompt)


# --- the model -----------------------------------------------------------------------------
def test_link_seconds_is_rtt_plus_uplink_transfer():
    m = LinkModel(rtt_ms=40, uplink_kbps=64)
    up = uplink_bytes(10)
    assert up == FRAME_BYTES + 10 * ID_BYTES
    assert m.seconds(up) == pytest.approx(0.040 + up * 8 / 64_000)
    assert LinkModel(rtt_ms=40).seconds(10_000) == pytest.approx(0.040)   # rate 0 = unlimited
    assert LinkModel().seconds(10_000) == 0 and LinkModel(uplink_kbps=1).seconds(1) > 0
    assert uplink_bytes(3, with_probs=True) == FRAME_BYTES + 3 * (ID_BYTES + PROB_BYTES)


def test_link_knobs_validate_with_one_line_errors():
    assert DecodeConfig.from_dict({"link_rtt_ms": "25", "link_uplink_kbps": "128"}).link_rtt_ms == 25.0
    for bad in ({"link_rtt_ms": -1}, {"link_uplink_kbps": "fast"}, {"link_rtt_ms": float("nan")}):
        with pytest.raises(ConfigError) as e:
            DecodeConfig.from_dict(bad)
        assert "\n" not in str(e.value) and "link_" in str(e.value)


def test_each_cloud_call_pays_the_modelled_link(demo, prompt):
    rtt, kbps = 50.0, 100.0
    tr = decode(demo, prompt, link_rtt_ms=rtt, link_uplink_kbps=kbps)
    called = [r for r in tr.rounds if r.verified]
    assert called and all(r.request_s is None for r in tr.rounds)   # modelled, not measured
    # the first call carries the whole prompt, later ones the catch-up and the block
    first = called[0]
    assert first.bytes_up == FRAME_BYTES + ID_BYTES * (prompt.length - 1 + first.cloud_fed)
    for r in called[1:]:
        assert r.bytes_up == FRAME_BYTES + ID_BYTES * r.cloud_fed
    for r in called:
        assert r.bytes_down == FRAME_BYTES + 2 * ID_BYTES
        assert r.link_s == pytest.approx(rtt / 1000 + r.bytes_up * 8 / (kbps * 1000))
    m = tr.metrics
    link_s = sum(r.link_s for r in called)
    assert m["uplink_calls"] == m["cloud_calls"] == len(called)
    assert m["bytes_up"] == sum(r.bytes_up for r in called)
    assert m["link"] == "modelled"
    assert m["link_s"] == pytest.approx(link_s, abs=1e-4)
    assert m["e2e_s"] == pytest.approx(m["wall_s"] + link_s, abs=2e-4)
    assert m["e2e_ms_per_token"] == pytest.approx(1000 * m["e2e_s"] / m["new_tokens"], rel=1e-3)
    # the first round of classic SD is verified: its tokens arrive after one round trip
    assert m["ttft_s"] >= rtt / 1000 + first.bytes_up * 8 / (kbps * 1000)
    # the link changes the accounting, never the tokens
    assert decode(demo, prompt).token_ids == tr.token_ids


def test_link_off_costs_nothing_but_still_counts_bytes(demo, prompt):
    m = decode(demo, prompt).metrics
    assert m["link"] == "none" and m["link_s"] == 0.0
    assert m["e2e_s"] == pytest.approx(m["wall_s"], abs=1e-4)
    assert m["bytes_up"] > 0 and m["bytes_per_call"] > 0


def test_entropy_gate_sends_nothing_for_uncalled_blocks(demo, prompt):
    always = decode(demo, prompt, link_rtt_ms=80)
    gated = decode(demo, prompt, link_rtt_ms=80, entropy_threshold=1.5)
    skipped = [r for r in gated.rounds if not r.verified]
    assert skipped, "threshold 1.5 should leave some blocks to the edge on this clip"
    assert all(r.bytes_up == r.bytes_down == 0 and r.link_s == 0 for r in skipped)
    g, a = gated.metrics, always.metrics
    assert g["uplink_calls"] == len(gated.rounds) - len(skipped) < a["uplink_calls"]
    assert g["link_s"] == pytest.approx(0.080 * g["uplink_calls"], abs=1e-4)


def test_sampling_rule_also_sends_draft_probabilities(demo, prompt):
    tr = decode(demo, prompt, verify="sampling", temperature=0.8, seed=3)
    called = [r for r in tr.rounds if r.verified]
    for r in called[1:]:
        assert r.bytes_up == FRAME_BYTES + r.cloud_fed * ID_BYTES + r.cloud_fed * PROB_BYTES


# --- a remote cloud that is not there ------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


REFUSED = [
    ({"verify": "sampling"}, "verify=sampling needs the cloud's full distribution"),
    ({"temperature": 0.7}, "temperature 0 only"),
    ({"link_rtt_ms": 20}, "the link is measured"),
]


@pytest.fixture(scope="module")
def cli_runs():
    """The module's `run --cloud-url` command lines (URLs where nothing listens) in one CLI
    process (tests/cli_many.py: a process start costs more than these lines' own work)."""
    url = f"http://127.0.0.1:{_free_port()}"
    cases = {"down": ["run", CLIP, "--cloud-url", url],
             # refused before any connection is tried: the URL points nowhere
             **{f"refused{i}": ["run", CLIP, "--cloud-url", f"http://127.0.0.1:{_free_port()}",
                                *[a for k, v in knobs.items() for a in ("--set", f"{k}={v}")]]
                for i, (knobs, _) in enumerate(REFUSED)}}
    return dict(zip(cases, run_many(cases.values())), url=url)


def test_server_down_is_one_line_and_exit_2(cli_runs):
    url, p = cli_runs["url"], cli_runs["down"]
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr
    assert url in lines[0] and "not reachable" in lines[0] and "make cloud" in lines[0]


def test_a_server_that_never_answers_times_out_with_one_line(demo):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    held: list = []
    stop = threading.Event()

    def accept():   # a real TCP peer that takes the connection and says nothing
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                pass
    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        url = f"http://127.0.0.1:{srv.getsockname()[1]}"
        with pytest.raises(RemoteError) as e:
            CompletionsClient(url, timeout=0.5).models()
        assert str(e.value) == f"cloud server {url} did not answer within 0.5 s"
    finally:
        stop.set()
        t.join()
        for c in held:
            c.close()
        srv.close()


@pytest.mark.parametrize("url", ["ftp://host:1", "http://", "http://host:notaport"])
def test_bad_cloud_urls_are_user_errors(demo, url):
    with pytest.raises(UserError) as e:
        with_cloud(demo, url)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("i,needle", [(i, needle) for i, (_, needle) in enumerate(REFUSED)],
                         ids=[f"knobs{i}-{needle}" for i, (_, needle) in enumerate(REFUSED)])
def test_what_a_remote_cloud_cannot_verify_exactly_is_refused_first(cli_runs, i, needle):
    p = cli_runs[f"refused{i}"]
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1 and needle in p.stderr


def test_blank_cloud_url_keeps_the_local_cloud(demo):
    assert with_cloud(demo, "  ") is demo
    assert math.isfinite(DecodeConfig().link_rtt_ms)
