"""The real cloud server for the remote tests: `make cloud` on a free port.

The virtualenv is built once per machine (scripts/cloud/cloud.sh caches it under
~/.cache/specscope); a machine where it cannot be built skips the tests that need the server,
saying why. Start-up waits for /v1/models with a bounded timeout and shows the server's log
tail when it does not come up.

`shared_server(key, make_args)`: one server per configuration per test run, shared by every test
file and xdist worker that asks for it (the suite's time on a busy machine is mostly server
start-up). The first caller starts it under a file lock and writes its port file under
test-artifacts/cloud-shared/; later callers, in any process of the same run, reuse it while it
answers. The run's controller stops them at the session's end (conftest.py), and servers a
killed run left (its controller gone) at the next session's start or end. Each test holds them
alone while it runs (use_shared). Port files and model folders are per run.
"""
from __future__ import annotations

import fcntl
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
SUITE_BUILD_WAIT_S = float(os.environ.get("SPECSCOPE_SUITE_BUILD_WAIT_S", "1200"))


def build_wait(limit: float) -> float:
    """How long a test may still wait for a background build: `limit`, and never past
    SUITE_BUILD_WAIT_S after the suite started (conftest sets SPECSCOPE_SUITE_T0), so that a
    fresh machine's builds cannot hold the suite past its time (the tests skip instead)."""
    t0 = float(os.environ.get("SPECSCOPE_SUITE_T0", time.time()))
    return max(1.0, min(limit, t0 + SUITE_BUILD_WAIT_S - time.time()))
START_TIMEOUT = 900       # vLLM CPU start: ~1 min alone, up to ~8 min on a loaded 2-core machine
SHARED = ROOT / "test-artifacts" / "cloud-shared"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build_venv() -> str:
    """The cloud virtualenv's path, building it if needed; skips the caller when it can't."""
    t0 = time.time()
    wait = build_wait(BUILD_TIMEOUT)
    try:
        p = subprocess.run([str(SCRIPT), "venv"], capture_output=True, text=True,
                           timeout=wait, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.skip(f"the cloud virtualenv did not build within {wait:.0f} s (the suite waits for a "
                    f"background build until {SUITE_BUILD_WAIT_S:.0f} s after its start)")
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
        self.pgid: int | None = None         # a server another process started (attach)
        self.start_s: list[float] = []

    @classmethod
    def attach(cls, info: dict) -> "CloudServer":
        """A handle on a shared server started by another process (its port file)."""
        srv = cls.__new__(cls)
        srv.make_args, srv.port, srv.url = tuple(info["make_args"]), info["port"], info["url"]
        srv.log_path = SHARED / f"cloud-{srv.port}.log"
        srv.proc, srv.pgid, srv.start_s = None, info["pgid"], [info.get("start_s", 0.0)]
        return srv

    def start(self) -> None:
        # --enforce-eager: no torch.compile warm-up at each start (vLLM's compile cache does
        # not reload across starts), the same float32 forwards
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
        if self.proc is None and self.pgid is not None:
            self._stop_group(self.pgid)
            self.pgid = None
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

    def _stop_group(self, pgid: int) -> None:
        """SIGTERM a group this handle did not start (after checking it is a `make` we ran),
        SIGKILL what is left after 30 s, then wait for the port to be free."""
        try:
            cmd = Path(f"/proc/{pgid}/cmdline").read_bytes().split(b"\0")
            if not (cmd[0].endswith(b"make") and f"CLOUD_PORT={self.port}".encode() in cmd):
                return                               # the pid was reused by something else
        except OSError:
            pass        # make is gone; its group may live on (a pid in use as a group id is not reused)
        for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 30)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            t0 = time.time()
            while time.time() - t0 < wait:
                try:
                    os.killpg(pgid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.2)
            else:
                continue
            break
        t0 = time.time()
        while time.time() - t0 < 30 and self.ready():
            time.sleep(0.5)

    def kill(self) -> None:
        """SIGKILL the whole group at once: a crash, not a shutdown (test_audit_llama's dying
        llama-server)."""
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)
            self.proc = None

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the server's live processes have used so far: every
        process in the group `make` started (the API server, vLLM's engine core, any worker)."""
        pgid = self.proc.pid if self.proc is not None else self.pgid
        ticks = 0
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if int(fields[2]) == pgid:          # (pgrp: the 5th field, the 3rd after the name)
                    ticks += int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")

    def log_tail(self, n: int = 15) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(lines[-n:])


def run_id() -> str:
    """The same for every process of one pytest run (xdist sets it in each worker)."""
    return os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"


def _owner() -> int:
    """The run's controller: the xdist worker's parent, or this process."""
    return os.getppid() if "PYTEST_XDIST_WORKER" in os.environ else os.getpid()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


class _Lock:
    """An exclusive file lock under SHARED (held across processes; released on exit or crash)."""

    def __init__(self, name: str):
        SHARED.mkdir(parents=True, exist_ok=True)
        self.path = SHARED / f"{name}.lock"

    def __enter__(self):
        self.f = open(self.path, "w")
        fcntl.flock(self.f, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        self.f.close()


def shared_dir(name: str, build) -> Path:
    """test-artifacts/cloud-shared/run-<run>/<name>, built once per run by `build(path)` (a model
    folder a shared server serves); clean_shared() removes those of past runs."""
    path = SHARED / f"run-{run_id()}" / name
    with _Lock(f"dir-{name}"):
        if not path.is_dir():
            path.parent.mkdir(parents=True, exist_ok=True)
            build(path)
    return path


def shared_server(key: str, make_args: tuple = ("cloud",)) -> "CloudServer":
    """The run's one server for `make_args` (see the module's doc). The caller must not stop it."""
    name = f"server-{key}-{run_id()}"
    info_path = SHARED / f"{name}.json"
    with _Lock(name):
        if info_path.is_file():
            srv = CloudServer.attach(json.loads(info_path.read_text()))
            if srv.ready():
                print(f"cloud server {key} shared at {srv.url} (started by another test file)")
                return srv
            srv.stop()                                  # it died: start it afresh
            info_path.unlink()
        build_venv()
        srv = CloudServer(SHARED, make_args)
        srv.start()
        info_path.write_text(json.dumps({"owner": _owner(), "make_args": list(make_args), "url": srv.url,
                                         "port": srv.port, "pgid": srv.proc.pid,
                                         "start_s": srv.start_s[-1]}))
        print(f"cloud server {key} ({' '.join(make_args)}) ready in {srv.start_s[-1]:.0f} s at {srv.url}")
        return srv


def use_shared(key: str):
    """Hold `key`'s servers for one test: tests of two files (two xdist workers) never send them
    requests at the same time. vLLM batches concurrent requests, and the audit's exact replay
    holds a request's drafts to what the drafter proposes for it alone: with test_served_ab.py's
    requests beside them (its contexts run past the drafter's window), test_audit.py's clean run
    once saw a replay_mismatch (1 run of 1, 2 cores at load ~25)."""
    return _Lock(f"use-{key}")


def stop_shared(owner: int | None = None) -> list[str]:
    """Stop the shared servers of the run whose controller is `owner` (at its session's end)
    and those whose run's controller is gone (a killed run's, also at a session's start): the
    URLs it stopped. Two runs at once in one checkout each have their own (port files are per
    run)."""
    stopped = []
    for info_path in sorted(SHARED.glob("server-*.json")):
        with _Lock(info_path.stem):
            try:
                info = json.loads(info_path.read_text())
            except (OSError, ValueError):
                continue
            if info.get("owner") != owner and info.get("owner") and _alive(info["owner"]):
                continue
            CloudServer.attach(info).stop()
            info_path.unlink(missing_ok=True)
            stopped.append(info["url"])
    return stopped


def clean_shared(max_age_s: float = 6 * 3600) -> None:
    """Remove the shared folders, lock files and server logs of runs older than `max_age_s`
    (at a session's start)."""
    import shutil

    for d in [*SHARED.glob("run-*"), *SHARED.glob("server-*-*.lock"), *SHARED.glob("cloud-*.log")]:
        if time.time() - d.stat().st_mtime > max_age_s:
            shutil.rmtree(d, ignore_errors=True) if d.is_dir() else d.unlink(missing_ok=True)
