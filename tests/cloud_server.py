"""The real cloud server for the remote tests: `make cloud` on a free port.

The virtualenv is built once per machine (scripts/cloud/cloud.sh caches it under
~/.cache/specscope); a machine where it cannot be built skips the tests that need the server,
saying why. Start-up waits for /v1/models with a bounded timeout and shows the server's log
tail when it does not come up.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "cloud" / "cloud.sh"
BUILD_TIMEOUT = 1800      # first build on a fresh machine: a ~1 GB install
START_TIMEOUT = 900       # vLLM CPU start: ~1 min alone, up to ~8 min on a loaded 2-core machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_venv() -> str:
    """The cloud virtualenv's path, building it if needed; skips the caller when it can't."""
    t0 = time.time()
    try:
        p = subprocess.run([str(SCRIPT), "venv"], capture_output=True, text=True,
                           timeout=BUILD_TIMEOUT, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.skip(f"the cloud virtualenv did not build within {BUILD_TIMEOUT} s")
    if p.returncode != 0:
        tail = [ln for ln in p.stderr.splitlines() if ln.strip() and "is ignored" not in ln][-3:]
        pytest.skip("the cloud virtualenv (vLLM) cannot be built on this machine: " + " | ".join(tail))
    print(f"cloud venv ready in {time.time() - t0:.0f} s: {p.stdout.strip()}")
    return p.stdout.strip()


class CloudServer:
    """`make cloud CLOUD_PORT=<free port>` in its own process group; stop() kills the group.
    `make_args`: another target and its variables (`cloud-spec SPEC=ngram`, docs/audit.md)."""

    def __init__(self, log_dir: Path, make_args: tuple = ("cloud",)):
        self.make_args = tuple(make_args)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(log_dir) / f"cloud-{self.port}.log"
        self.proc: subprocess.Popen | None = None
        self.start_s: list[float] = []

    def start(self) -> None:
        # --enforce-eager: no torch.compile warm-up at each start (the test server starts twice;
        # vLLM's compile cache does not reload across starts), the same float32 forwards
        env = dict(os.environ, CLOUD_PORT=str(self.port), CLOUD_THREADS="1",
                   CLOUD_EXTRA_ARGS=os.environ.get("CLOUD_EXTRA_ARGS", "--enforce-eager"))
        log = open(self.log_path, "ab")
        t0 = time.time()
        self.proc = subprocess.Popen(["make", "-s", "--no-print-directory", *self.make_args,
                                      f"CLOUD_PORT={self.port}"], cwd=ROOT, env=env,
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        while time.time() - t0 < START_TIMEOUT:
            if self.proc.poll() is not None:
                raise RuntimeError(f"make cloud exited with {self.proc.returncode}:\n{self.log_tail()}")
            if self.ready():
                self.start_s.append(time.time() - t0)
                return
            time.sleep(1.0)
        self.stop()
        raise RuntimeError(f"make cloud not ready within {START_TIMEOUT} s:\n{self.log_tail()}")

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/v1/models", timeout=2) as r:
                return bool(json.loads(r.read()).get("data"))
        except (OSError, ValueError):
            return False

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None
        # vLLM's engine core is a child process: wait until the port is really free again
        t0 = time.time()
        while time.time() - t0 < 30 and self.ready():
            time.sleep(0.5)

    def kill(self) -> None:
        """SIGKILL the whole group at once: a crash, not a shutdown."""
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)
            self.proc = None

    def log_tail(self, n: int = 15) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-n:])
