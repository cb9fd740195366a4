"""Helpers for the app tests: start app.py as a subprocess on a free port, drive chromium.

SPECSCOPE_TEST_URL=http://host:port/ makes the tests use an already running app instead.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "config", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


_SHARED: dict = {}


@contextlib.contextmanager
def app_server(timeout: float = 300.0):
    """Yields the base URL (with a trailing slash) of a running SpecScope app: one app.py per
    test process (each xdist worker), started on first use and stopped when the process exits,
    shared as SPECSCOPE_TEST_URL's external app is (the tests never assume a fresh server)."""
    external = os.environ.get("SPECSCOPE_TEST_URL")
    if external:
        yield external.rstrip("/") + "/"
        return
    shared = _SHARED.get("app")
    if shared is None or shared[1].poll() is not None:
        ctx = app_process(timeout=timeout)
        url, proc = ctx.__enter__()
        _SHARED["app"] = shared = (url, proc)
        atexit.register(ctx.__exit__, None, None, None)
    yield shared[0]


# Gradio's launch() checks that its own URL answers a HEAD within 3 s, once (a timeout ends the
# check), and exits with this line when it did not: on a busy machine a slow first answer,
# not a broken app. app_process starts app.py again on a new port then (at most 3 times).
GRADIO_BUSY = "When localhost is not accessible"


@contextlib.contextmanager
def app_process(env: dict | None = None, timeout: float = 300.0, log_name: str = "app-server.log"):
    """Start app.py in its own process on a free port; yields (base URL, Popen)."""
    (ROOT / "test-artifacts").mkdir(exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER")       # one log per xdist worker
    if worker:
        log_name = log_name.replace(".log", f"-{worker}.log")
    path = ROOT / "test-artifacts" / log_name
    for attempt in range(3):
        port = free_port()
        full = {**os.environ, "GRADIO_SERVER_PORT": str(port), "GRADIO_SERVER_NAME": "127.0.0.1",
                "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **(env or {})}
        log = open(path, "a" if attempt else "w")
        proc = subprocess.Popen([sys.executable, str(ROOT / "app.py")], cwd=ROOT, env=full,
                                stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + timeout
        while not _ready(url) and proc.poll() is None:
            if time.monotonic() > deadline:
                _stop(proc, log)
                raise RuntimeError(f"app.py did not serve {url} within {timeout:.0f} s")
            time.sleep(0.3)
        if proc.poll() is None:
            break
        _stop(proc, log)
        if attempt == 2 or GRADIO_BUSY not in path.read_text(errors="replace"):
            raise RuntimeError(f"app.py exited with code {proc.returncode} before serving")
    try:
        yield url, proc
    finally:
        _stop(proc, log)


def _stop(proc, log) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def launch_chromium(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


# Playwright's default wait for every page here: the suite runs beside other work (2 busy
# cores: a Gradio page load or a short decode can take tens of seconds), and a wait polls for
# its state, so a generous limit costs nothing when the page is quick.
WAIT_MS = 120_000


@contextlib.contextmanager
def app_page(viewport: tuple[int, int] = (1500, 1000)):
    """A chromium page on the shared app (app_server), with `page.base_url` and WAIT_MS as its
    default timeout. tests/conftest.py's module-scoped `page` fixture is this."""
    from playwright.sync_api import sync_playwright

    with app_server() as url, sync_playwright() as p:
        browser = launch_chromium(p)
        try:
            pg = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
            pg.set_default_timeout(WAIT_MS)
            pg.base_url = url
            yield pg
        finally:
            browser.close()


def pick_option(page, elem_id: str, text: str) -> None:
    """Choose `text` in the gr.Dropdown with this elem_id."""
    page.locator(f"#{elem_id} input").first.click()
    page.locator(f"#{elem_id} [role=option]", has_text=text).first.click()


def wait_state(page, elem_id: str, states=("ok", "warn", "err"), timeout: float = 180_000) -> str:
    """Wait until the status box #elem_id shows one of `states`; returns the state."""
    sel = ", ".join(f"#{elem_id} [data-state={s}]" for s in states)
    page.wait_for_selector(sel, timeout=timeout)
    return page.locator(f"#{elem_id} .ss-status").first.get_attribute("data-state")
