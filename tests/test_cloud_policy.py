"""Issue 30: a public Space is not a proxy. Who may point the app's remote cloud where
(specdec_core/backends/cloud_policy.py), what a misbehaving server can make the client hold
(openai_client.py), and the judged scenario: the app served on 0.0.0.0, driven by chromium and
gradio_client, against real loopback listeners that count the connections they get."""
from __future__ import annotations

import socket
import subprocess
import threading
import time
import tracemalloc
from pathlib import Path

import pytest
from poll import wait_until

from specdec_core.backends.cloud_policy import (DEFAULT_SERVER_NAME, ENV_ANY, ENV_URLS, NONE,
                                                CloudURLRefused, canonical, cloud_policy,
                                                is_loopback)
from specdec_core.backends.openai_client import MAX_REPLY_BYTES, CompletionsClient, RemoteError
from specdec_core.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
LIST = "http://127.0.0.1:8000, http://10.0.0.5:8001/"


# --- the policy ----------------------------------------------------------------------------
def test_canonical_is_the_address_a_client_connects_to():
    assert canonical("http://127.0.0.1:8000/") == "http://127.0.0.1:8000"
    assert canonical("HTTP://LocalHost:8000/v1") == "http://localhost:8000"
    assert canonical("127.0.0.1:9") == "http://127.0.0.1:9"
    assert canonical("https://h") == "https://h:443" and canonical("http://h") == "http://h:80"
    assert canonical("http://[::1]:8000") == "http://[::1]:8000"
    for bad in ("ftp://h:1", "http://", "http://h:notaport", "http://u:p@127.0.0.1:8000", ""):
        with pytest.raises(ValueError):
            canonical(bad)


def test_loopback_is_127_8_and_localhost_without_a_name_lookup():
    for h in ("127.0.0.1", "127.9.8.7", "::1", "[::1]", "localhost", "LOCALHOST"):
        assert is_loopback(h), h
    for h in ("0.0.0.0", "::", "10.0.0.1", "169.254.169.254", "192.168.1.2", "example.com",
              "127.0.0.1.nip.io", "", None):
        assert not is_loopback(h), h


def test_served_to_the_network_without_a_list_means_no_cloud_url():
    for env in ({}, {"GRADIO_SERVER_NAME": "0.0.0.0"}, {"GRADIO_SERVER_NAME": "10.1.2.3"},
                {"GRADIO_SERVER_NAME": "127.0.0.1", "SPACE_ID": "someone/specscope"},
                {"GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SHARE": "True"},
                {"GRADIO_SERVER_NAME": "0.0.0.0", ENV_ANY: "0"}):
        p = cloud_policy(env)
        assert p.mode == "off" and ENV_URLS in p.why and "\n" not in p.why, env
        assert p.resolve("") is None and p.resolve(None) is None and p.resolve(" none ") is None
        for url in ("http://127.0.0.1:8000", "http://169.254.169.254/latest/meta-data", "10.0.0.1:22"):
            with pytest.raises(CloudURLRefused) as e:
                p.resolve(url)
            assert isinstance(e.value, UserError) and "\n" not in str(e.value)
            assert "off on this server" in str(e.value)
    assert "serves the network (0.0.0.0)" in cloud_policy({}).why


def test_local_use_or_the_operators_word_allows_any_url():
    for env in ({"GRADIO_SERVER_NAME": "127.0.0.1"}, {"GRADIO_SERVER_NAME": "localhost"},
                {"GRADIO_SERVER_NAME": "::1"}, {"GRADIO_SERVER_NAME": "0.0.0.0", ENV_ANY: "1"},
                {ENV_ANY: "true", "SPACE_ID": "x/y"}):
        p = cloud_policy(env)
        assert p.mode == "free", env
        assert p.resolve(" http://10.0.0.9:8000 ") == "http://10.0.0.9:8000"
        assert p.resolve("") is None


def test_the_allowlist_is_exactly_what_may_be_used():
    for extra in ({}, {ENV_ANY: "1"}, {"GRADIO_SERVER_NAME": "127.0.0.1"}):
        p = cloud_policy({ENV_URLS: LIST, "GRADIO_SERVER_NAME": "0.0.0.0", **extra})
        assert p.mode == "list"
        assert p.choices() == [NONE, "http://127.0.0.1:8000", "http://10.0.0.5:8001"]
        assert p.resolve(NONE) is None and p.resolve("") is None
        assert p.resolve("http://127.0.0.1:8000") == "http://127.0.0.1:8000"
        # the same address spelt otherwise: the operator's entry is what gets used
        assert p.resolve("HTTP://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000"
        assert p.resolve("http://10.0.0.5:8001") == "http://10.0.0.5:8001"
        for other in ("http://127.0.0.1:8001", "http://localhost:8000", "http://127.0.0.2:8000",
                      "https://127.0.0.1:8000", "http://u@127.0.0.1:8000", "http://10.0.0.5",
                      "gopher://127.0.0.1:8000", "http://127.0.0.1:8000@evil:80"):
            with pytest.raises(CloudURLRefused) as e:
                p.resolve(other)
            assert ENV_URLS in str(e.value) and "\n" not in str(e.value), other


def test_a_malformed_allowlist_entry_stops_the_app_naming_it():
    with pytest.raises(ValueError) as e:
        cloud_policy({ENV_URLS: "http://127.0.0.1:8000,ftp://x:21"})
    assert ENV_URLS in str(e.value) and "ftp://x:21" in str(e.value)
    assert cloud_policy({ENV_URLS: " , "}).mode == "off"      # empty list = no list


def test_the_policy_reads_the_address_app_py_serves_on(monkeypatch):
    from ui.page import launch_kwargs

    monkeypatch.delenv("GRADIO_SERVER_NAME", raising=False)
    assert launch_kwargs()["server_name"] == DEFAULT_SERVER_NAME
    monkeypatch.setenv("GRADIO_SERVER_NAME", "127.0.0.1")
    assert launch_kwargs()["server_name"] == "127.0.0.1" and cloud_policy().mode == "free"
    # `make demo` is local use: it serves on loopback unless told otherwise
    p = subprocess.run(["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    line = [ln for ln in p.stdout.splitlines() if "app.py" in ln][-1]
    assert "GRADIO_SERVER_NAME=${GRADIO_SERVER_NAME:-127.0.0.1}" in line, p.stdout


# --- a misbehaving server: bounded, one fixed line -----------------------------------------
class RawServer:
    """A loopback TCP server running `behave(conn)` on each connection; counts bytes it sent."""

    def __init__(self, behave):
        self.behave, self.sent, self.drips, self.done = behave, 0, 0, threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.threads = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.done.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            t = threading.Thread(target=self._run, args=(conn,), daemon=True)
            t.start()
            self.threads.append(t)

    def _run(self, conn):
        try:
            conn.recv(65536)                   # the request
            self.behave(self, conn)
        except OSError:
            pass
        finally:
            conn.close()

    def send(self, conn, data: bytes):
        conn.sendall(data)
        self.sent += len(data)

    def close(self):
        self.done.set()
        self.sock.close()
        for t in self.threads:
            t.join(timeout=10)


def endless_chunked(srv, conn):
    srv.send(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n%s\r\n" % (65536, b"[" * 65536)
    while not srv.done.is_set():
        srv.send(conn, chunk)


def huge_length(srv, conn):
    srv.send(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 10737418240\r\n\r\n{")
    srv.done.wait(20)


# A dripping server sends one byte every 0.05 s, far within the client's socket timeout; it
# gives up after DRIPS bytes (30 s) and closes, so a client with no total time limit gets a
# different line (a short body, a bad header) instead of hanging the test.
DRIPS = 600


def drip_body(srv, conn):
    srv.send(conn, b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
    while not srv.done.is_set() and srv.drips < DRIPS:
        srv.send(conn, b" ")
        srv.drips += 1
        time.sleep(0.05)


def drip_headers(srv, conn):
    srv.send(conn, b"HTTP/1.1 200 OK\r\nX-Slow: ")
    while not srv.done.is_set() and srv.drips < DRIPS:
        srv.send(conn, b"a")
        srv.drips += 1
        time.sleep(0.05)


def call(behave, timeout=20.0):
    """The client's one line for a server behaving so. How long each took: scripts/bench_timings.py
    (a client that waited for its total limit instead says "did not answer within 20 s")."""
    srv = RawServer(behave)
    try:
        with pytest.raises(RemoteError) as e:
            CompletionsClient(srv.url, timeout=timeout).models()
        return srv, str(e.value), e.value
    finally:
        srv.close()


def test_an_endless_body_is_cut_at_the_cap_while_it_streams():
    tracemalloc.start()
    try:
        srv, msg, _ = call(endless_chunked)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert msg == (f"cloud server {srv.url} sent a reply over {MAX_REPLY_BYTES / 2**20:g} MiB "
                   f"(SPECSCOPE_CLOUD_MAX_REPLY_MB); refused")
    assert peak < 3 * MAX_REPLY_BYTES, peak
    assert srv.sent > MAX_REPLY_BYTES          # it really sent more than the cap


def test_a_declared_huge_body_is_refused_before_reading_it():
    srv, msg, _ = call(huge_length)          # it sends "{" and then nothing: reading would wait
    assert msg == (f"cloud server {srv.url} sent a reply over {MAX_REPLY_BYTES / 2**20:g} MiB "
                   f"(SPECSCOPE_CLOUD_MAX_REPLY_MB); refused")


@pytest.mark.parametrize("behave", [drip_body, drip_headers], ids=["body", "headers"])
def test_a_server_dripping_bytes_is_cut_at_the_total_time(behave):
    srv, msg, _ = call(behave, timeout=1.0)
    assert msg == f"cloud server {srv.url} did not answer within 1 s"
    assert 2 <= srv.drips < DRIPS, srv.drips   # bytes kept coming; the total limit cut them


SECRET = "internal-db-password-s3cr3t"


@pytest.mark.parametrize("reply,needle", [
    (f"HTTP/1.1 500 Oops\r\nContent-Type: application/json\r\nContent-Length: {len(SECRET) + 15}\r\n\r\n"
     f'{{"message": "{SECRET}"}}', "answered HTTP 500 to /v1/models (a server error"),
    (f"SSH-2.0-OpenSSH_9 {SECRET}\r\n\r\n", "not valid HTTP"),
    (f"HTTP/1.1 200 OK\r\nContent-Length: {len(SECRET)}\r\n\r\n{SECRET}", "not JSON (HTTP 200)"),
], ids=["http-500", "not-http", "not-json"])
def test_failures_never_echo_what_the_remote_said(reply, needle):
    def behave(srv, conn):
        srv.send(conn, reply.encode())
    srv, msg, err = call(behave)
    assert needle in msg and SECRET not in msg and "\n" not in msg, msg
    assert msg.startswith(f"cloud server {srv.url} ")
    if "500" in needle:
        assert err.detail == SECRET            # for the server's log, not the page


def test_model_names_from_a_server_are_shown_short(monkeypatch):
    from specdec_core.backends.remote import _pick_model

    names = ["x" * 5000, "bad\x1b[2Jname", *[f"m{i}" for i in range(8)]]
    body = '{"data": [' + ",".join(f'{{"id": "{n}"}}' for n in names).replace("\x1b", "\\u001b") + "]}"

    def behave(srv, conn):
        srv.send(conn, f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode())
    srv = RawServer(behave)
    try:
        with pytest.raises(RemoteError) as e:
            _pick_model(CompletionsClient(srv.url, 10), None)
    finally:
        srv.close()
    msg = str(e.value)
    assert "serves several models" in msg and "<unprintable>" in msg and "and 5 more" in msg
    assert len(msg) < 400 and "\x1b" not in msg, msg


def reply_cut_short(srv, conn):
    srv.send(conn, b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"data": [')


def test_a_reply_cut_short_is_a_closed_connection_not_a_short_body():
    srv, msg, _ = call(reply_cut_short)     # at once: not after the 20 s limit (that line differs)
    assert msg == f"cloud server {srv.url} closed the connection in the middle of a reply (did it stop?)"


# --- the judged scenario: the app on 0.0.0.0, a real browser, real listeners ----------------
def live_args(client, cloud: str, sample: str = "angry_01") -> list:
    """The Live run's inputs at the page's defaults, with this sample and cloud field value."""
    dep = next(d for d in client.config["dependencies"] if d.get("api_name") == "live_run")
    comps = {c["id"]: c["props"] for c in client.config["components"]}
    args = []
    for cid in dep["inputs"]:
        props = comps[cid]
        if props.get("elem_id") == "live-cloud-url":
            args.append(cloud)
        elif props.get("elem_id") == "live-sample":
            args.append(sample)
        elif props.get("label", "").startswith("or upload"):
            args.append(None)
        else:
            args.append(props.get("value"))
    return args


def live_status(client, cloud: str) -> str:
    """The status line a crafted Live run call ends with (its first output), as text."""
    import re

    out = client.predict(*live_args(client, cloud), api_name="/live_run")
    return re.sub(r"<[^>]+>", " ", out[0])


def settle(seconds: float = 0.5):
    time.sleep(seconds)        # a connection in flight would be counted by now


@pytest.mark.browser
def test_served_on_0000_a_url_from_the_page_or_the_api_reaches_no_listener(artifacts):
    from urllib.parse import urlencode

    from gradio_client import Client, handle_file
    from playwright.sync_api import sync_playwright

    from browser_util import app_process, launch_chromium, wait_state
    from openai_stub import Listener

    env = {"GRADIO_SERVER_NAME": "0.0.0.0", ENV_URLS: "", ENV_ANY: ""}
    with Listener() as target, app_process(env, log_name="app-cloud-off.log") as (url, _), \
            sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        # a share link carrying a cloud URL restores nothing of it
        page.goto(url + "?" + urlencode({"cloud_url": target.url, "sample": "sad_01"}))
        page.wait_for_selector("#live-run")
        box = page.locator("#live-cloud-url input, #live-cloud-url textarea").first
        assert box.is_disabled() and box.input_value() == ""
        info = page.inner_text("#live-cloud-url")
        assert "off: this app serves the network (0.0.0.0)" in info and ENV_URLS in info, info
        # a visitor who re-enables the box and types: the value reaches the server, is refused
        box.evaluate("e => { e.disabled = false; }")
        box.fill(target.url)
        page.click("#live-run")
        assert wait_state(page, "live-status") == "err"
        status = page.inner_text("#live-status")
        assert "cloud server URLs are off on this server" in status, status
        page.screenshot(path=str(artifacts / "cloud-url-off.png"), full_page=True)
        browser.close()

        client = Client(url, verbose=False, httpx_kwargs={"timeout": 120})
        for crafted in (target.url, f"127.0.0.1:{target.port}", f"http://localhost:{target.port}/v1"):
            assert "cloud server URLs are off on this server" in live_status(client, crafted), crafted
        # the named endpoints take no cloud URL: their config JSON refuses one as an unknown knob
        with pytest.raises(Exception) as e:
            client.predict("angry_01", None, f'{{"cloud_url": "{target.url}"}}', "demo", False, api_name="/run")
        assert "unknown knob(s): cloud_url" in str(e.value)
        # the other URL the API takes, an audio file by URL: Gradio's own guard refuses loopback
        with pytest.raises(Exception):
            client.predict("", handle_file(f"{target.url}/clip.wav"), "", "demo", False, api_name="/run")
        settle()
        assert target.accepted == 0
        socket.create_connection(("127.0.0.1", target.port), timeout=5).close()   # the counter counts
        wait_until(lambda: target.accepted > 0, "the connection counted")   # a busy machine lags
        assert target.accepted == 1


@pytest.mark.browser
def test_with_an_allowlist_the_listed_server_is_used_and_no_other(artifacts):
    from gradio_client import Client
    from playwright.sync_api import sync_playwright

    from browser_util import app_process, launch_chromium, wait_state
    from openai_stub import Listener, OpenAIStub
    from specdec_core.backends import load_backend

    demo = load_backend("demo")
    with OpenAIStub(demo.cloud, demo.tokenizer) as stub, Listener() as other:
        env = {"GRADIO_SERVER_NAME": "0.0.0.0", ENV_URLS: stub.url, ENV_ANY: "1"}
        with app_process(env, log_name="app-cloud-list.log") as (url, _), sync_playwright() as p:
            browser = launch_chromium(p)
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.goto(url)
            page.wait_for_selector("#live-run")
            page.locator("#live-cloud-url input").first.click()
            options = [o.split()[-1] for o in page.locator("#live-cloud-url [role=option]").all_inner_texts()]
            assert options == [NONE, stub.url], options      # (the selected one carries a tick)
            page.locator("#live-cloud-url [role=option]", has_text=stub.url).first.click()
            page.click("#live-run")
            assert wait_state(page, "live-status", timeout=240_000) in ("ok", "warn"), page.inner_text("#live-status")
            page.screenshot(path=str(artifacts / "cloud-url-list.png"), full_page=True)
            browser.close()
            assert stub.connections >= 1 and "/v1/completions" in stub.paths, stub.paths

            client = Client(url, verbose=False, httpx_kwargs={"timeout": 120})
            before = (stub.connections, len(stub.paths))
            for crafted in (other.url, f"http://localhost:{stub.port}", f"http://127.0.0.2:{stub.port}"):
                status = live_status(client, crafted)
                assert "verifies only on the cloud servers its operator listed" in status, status
            settle()
            assert other.accepted == 0 and (stub.connections, len(stub.paths)) == before


def test_the_cli_still_tells_its_user_what_their_server_said():
    import sys

    body = '{"message": "model is still loading\\u001b[2J"}'

    def behave(srv, conn):
        srv.send(conn, f"HTTP/1.1 503 Busy\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode())
    srv = RawServer(behave)
    try:
        p = subprocess.run([sys.executable, "-m", "specdec_core", "run", str(ROOT / "sample_audio" / "angry_01.wav"),
                            "--cloud-url", srv.url], capture_output=True, text=True, cwd=ROOT, timeout=300)
    finally:
        srv.close()
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr
    assert f"cloud server {srv.url} answered HTTP 503 to /v1/models" in lines[0]
    assert lines[0].endswith("the server said: model is still loading?[2J"), lines[0]
