"""`batch --engine ray`: the edges as Ray actors, on this machine or on a Ray cluster
(docs/scale.md). A worker that dies fails its row with a `retry` error and is restarted (up to
MAX_RESTARTS times); the batch goes on."""
from __future__ import annotations

import logging
import os
import sys
import time
from collections import deque
from contextlib import suppress
from pathlib import Path

from specdec_core.errors import UserError, first_line
from specdec_core.evaluation.batch.run import failed_row
from specdec_core.evaluation.batch.edges import EdgeActor

MAX_RESTARTS = 3
PING_S = 0.5
PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])
# Ray starts its workers at nice 15: on a machine with other work the edges then got a few % of a
# core (a batch 5-70x slower than --engine local under two busy loops), and they are the batch's
# whole point: nice 0. Nor does it prestart idle workers: they have Ray's default environment and
# can never host an edge, whose runtime env carries PYTHONPATH.
LOCAL_RAY = {"RAY_worker_niceness": "0", "RAY_enable_worker_prestart": "0",
             "RAY_prestart_worker_first_driver": "0"}


def _ray():
    try:
        import ray
    except ImportError:
        raise UserError("--engine ray needs Ray: pip install 'specscope[scale]' "
                        "(or pip install ray)") from None
    return ray


class RayEdges:
    """N edge actors that keep their backend between batches (scripts reuse one)."""

    def __init__(self, spec: dict, configs: dict[str, dict], workers: int | None = None,
                 address: str | None = None):
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        if address and "RAY_AUTH_MODE" not in os.environ and (
                os.environ.get("RAY_AUTH_TOKEN") or Path("~/.ray/auth_token").expanduser().is_file()):
            os.environ["RAY_AUTH_MODE"] = "token"   # `ray start` turns token auth on by default,
            # and a client only sends its token in token mode (read when ray is imported)
        for k, v in LOCAL_RAY.items():      # read by the raylet the local Ray starts (a cluster's
            os.environ.setdefault(k, v)     # are its `ray start`'s: docs/scale.md)
        if not address and "ray" not in sys.modules:
            # A local Ray on loopback only: Ray resolves even an explicit 127.0.0.1 to the host's
            # network address unless its "no cluster" mode is on (read when ray is imported).
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        ray = self.ray = _ray()
        # the driver's own code for the workers, also where the package is not installed
        paths = [PACKAGE_ROOT] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        quiet = dict(include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False,
                     runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(paths)}})
        self.owns = not ray.is_initialized()
        if self.owns and address:
            _probe(address)      # Ray itself retries an unreachable address for minutes
            try:
                ray.init(address=address, **quiet)
            except (ConnectionError, ValueError, RuntimeError) as e:
                raise UserError(f"cannot join the Ray cluster at {address}: {first_line(e)[:300]}") from None
        elif self.owns:
            workers = workers or os.cpu_count() or 1
            ray.init(address="local", num_cpus=workers, _node_ip_address="127.0.0.1", **quiet)
        if workers is None:
            workers = max(1, int(ray.cluster_resources().get("CPU", 1)))
        cls = ray.remote(num_cpus=1, max_restarts=MAX_RESTARTS, max_task_retries=0)(EdgeActor)
        self.configs = configs
        self.actors = [cls.remote(spec, configs) for _ in range(workers)]
        self.where: list[str | None] = [None] * workers
        self.in_flight: dict[int, object] = {}     # actor index -> job it is running

    def warm(self, urls=()) -> None:
        """Start every actor and load its backend (and its wrapper per server up); a backend
        that cannot be opened anywhere is a usage error (bad model folder), not a row failure."""
        errors = self.ray.get([a.open.remote(list(urls)) for a in self.actors])
        self.where = self.ray.get([a.where.remote() for a in self.actors])
        if all(errors):
            raise UserError(errors[0])

    def run(self, jobs, pool, emit, workers: int | None = None, speakers=None, cancel=None) -> None:
        """Run (clip, config name) jobs on the first `workers` actors; emit(job, row) as each finishes.
        `cancel` stops it within PING_S: rows in flight are dropped and their workers killed, so nothing
        keeps decoding for a batch nobody waits for."""
        ray = self.ray
        pending, inflight = deque(jobs), {}
        idle: deque[int] = deque()
        # actor -> when to ask whether it is up: all at once now, so a worker that died between
        # two batches costs no row (it gets rows again once Ray has restarted it)
        restarting = dict.fromkeys(range(min(workers or len(self.actors), len(self.actors))), 0.0)
        while pending or inflight or restarting:
            if cancel is not None and cancel.is_set():
                self._drop(inflight)
                return
            while idle and pending:
                job = pending.popleft()
                url, why = pool.pick()
                if why:
                    emit(job, failed_row(*job, self.configs[job[1]], why, retry=True))
                    continue
                a = idle.popleft()
                inflight[self.actors[a].run.remote(job, url, (speakers or {}).get(job[0].speaker))] = (a, job, url)
                self.in_flight[a] = job
            if not pending and not inflight:
                break
            now = time.monotonic()
            for a, when in list(restarting.items()):     # a dead worker is back once it answers
                if when <= now:
                    del restarting[a]
                    inflight[self.actors[a].where.remote()] = (a, None, None)
            if not inflight:
                if restarting:
                    time.sleep(PING_S)
                    continue
                for job in pending:                       # every worker is gone for good
                    emit(job, failed_row(*job, self.configs[job[1]], "every Ray worker died", retry=True))
                break
            ready, _ = ray.wait(list(inflight), num_returns=1,
                                timeout=PING_S if (restarting or cancel is not None) else None)
            for ref in ready:
                self._finished(ref, inflight, idle, restarting, pool, emit)

    def _finished(self, ref, inflight, idle, restarting, pool, emit) -> None:
        """One answer from an actor: a row (emitted), or "I am back" after a restart."""
        ray = self.ray
        a, job, url = inflight.pop(ref)
        if job is None:                           # the answer to "are you back?"
            try:
                self.where[a] = ray.get(ref)
                idle.append(a)
            except ray.exceptions.ActorDiedError:
                pass                              # restarts used up: retired
            except ray.exceptions.RayActorError:
                restarting[a] = time.monotonic() + PING_S
            return
        self.in_flight.pop(a, None)
        try:
            row, self.where[a] = ray.get(ref)
            idle.append(a)
        except ray.exceptions.RayActorError as e:
            row = failed_row(*job, self.configs[job[1]], f"worker {self.where[a] or a} died "
                             f"during this row ({type(e).__name__})", retry=True)
            restarting[a] = time.monotonic() + PING_S
        except ray.exceptions.RayError as e:
            row = failed_row(*job, self.configs[job[1]], f"internal error: {first_line(e)[:300]}")
            idle.append(a)
        pool.done(url, row)
        emit(job, row)

    def _drop(self, inflight: dict) -> None:
        """Stop the rows in flight: kill their actors (restarted by Ray for the next batch)."""
        for a in {a for a, job, _ in inflight.values() if job is not None}:
            with suppress(Exception):   # already gone
                self.ray.kill(self.actors[a], no_restart=False)
            self.in_flight.pop(a, None)

    def close(self) -> None:
        for a in getattr(self, "actors", []):
            with suppress(Exception):   # already gone
                self.ray.kill(a)
        self.actors = []
        if self.owns and self.ray.is_initialized():
            self.ray.shutdown()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _probe(address: str, timeout: float = 5.0) -> None:
    """A usage error now when nothing listens at `address` (host:port or ray://host:port;
    "auto" is left to Ray)."""
    import socket
    from urllib.parse import urlsplit

    if address == "auto":
        return
    try:
        parts = urlsplit(address if "://" in address else f"//{address}")
        host, port = parts.hostname, parts.port
    except ValueError:
        host = port = None
    if not host or not port:
        raise UserError(f"--ray-address must be host:port or ray://host:port (or auto), got {address!r}")
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        raise UserError(f"cannot reach the Ray cluster at {address}: "
                        f"{e.strerror or type(e).__name__} (is `ray start --head` running there?)") from None
