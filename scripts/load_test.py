"""A bounded loopback load test of a shared server (issue 37, 43): the app served as on a Space
(0.0.0.0, the default caps of specdec_core/caps.py), HEAVIES visitors (default 2) each decoding at
the caps (max new tokens and time limit at their caps, k 32, the special_text_stop fault so no
stop fires, the cloud-only baseline on) while another visitor does an ordinary run. Per
repetition: the ordinary run idle, beside the runs at the caps, idle again (interleaved). Prints
idle time, loaded time, their ratio and the bound 2 x idle + 2 s (issue 43) per repetition, and
the ranges; exits 1 when a repetition is over the bound.

    python scripts/load_test.py [--reps 3] [--n 3] [--heavies 2] [--host 0.0.0.0] [--lead-s 5] [--json out.json]

Nothing leaves the machine: the server is this checkout's app.py on a free port, reached on
127.0.0.1. Numbers: docs/benchmarks.md ("A visitor at the caps")."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))      # this checkout's specdec_core, as app.py gets it
SAMPLE = "angry_01"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(host: str = "0.0.0.0", env: dict | None = None, timeout: float = 300.0):
    """app.py on `host` and a free port, with the caps' defaults for that host; yields the URL."""
    port = free_port()
    env = {**os.environ, "GRADIO_SERVER_NAME": host, "GRADIO_SERVER_PORT": str(port),
           "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONUNBUFFERED": "1", **(env or {})}
    proc = subprocess.Popen([sys.executable, str(ROOT / "app.py")], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + timeout
        while not _ready(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"app.py did not serve {url}")
            time.sleep(0.3)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "config", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def heavy_config(host: str) -> dict:
    """A run at the caps the server applies on `host` (the same caps module, the same rule)."""
    os.environ["GRADIO_SERVER_NAME"] = host
    from specdec_core import caps

    caps.serve_app()
    return {"k": 32, "max_new_tokens": caps.cap("max_new_tokens"),
            "time_limit_s": caps.cap("time_limit_s"), "faults": ["special_text_stop"],
            "stop_at_first_sentence": False}


def ordinary(client, n: int = 1) -> float:
    """The median time of n ordinary runs (default knobs, no baseline), as the visitor waits."""
    times = []
    for _ in range(n):
        t = time.monotonic()
        client.predict(SAMPLE, None, "{}", "demo", False, api_name="/run")
        times.append(time.monotonic() - t)
    return statistics.median(times)


def wait_running(jobs, timeout: float = 300.0) -> None:
    """Poll until every job is queued on or decoding at the server."""
    from gradio_client.utils import Status

    on = {Status.IN_QUEUE, Status.PROCESSING, Status.ITERATING, Status.PROGRESS}
    deadline = time.monotonic() + timeout
    while not all(j.status().code in on or j.done() for j in jobs) and time.monotonic() < deadline:
        time.sleep(0.1)


def one_rep(url: str, heavy_cfg: dict, lead_s: float, n: int = 3, heavies: int = 2) -> dict:
    """The ordinary run's idle time (median of n before and n after) and its time while
    `heavies` other visitors run at the caps (started lead_s before it): the slowest of n runs
    (a starved run is the first one; the later ones may find a heavy run ended), with the
    median beside it. The heavy runs are stopped after (a visitor's Stop ends its run within a
    round)."""
    from gradio_client import Client

    ordn = Client(url, verbose=False, httpx_kwargs={"timeout": 300})
    others = [Client(url, verbose=False, httpx_kwargs={"timeout": 300}) for _ in range(heavies)]
    before = [ordinary(ordn) for _ in range(n)]
    jobs = [c.submit(SAMPLE, None, json.dumps(heavy_cfg), "demo", True, api_name="/run") for c in others]
    wait_running(jobs)
    time.sleep(lead_s)
    loaded = [ordinary(ordn) for _ in range(n)]
    overlapped = not any(j.done() for j in jobs)
    for c, j in zip(others, jobs):
        c.predict(api_name="/live_stop")
        with contextlib.suppress(Exception):
            j.result(timeout=120)
    after = [ordinary(ordn) for _ in range(n)]
    idle, load = statistics.median(before + after), max(loaded)
    return {"idle_s": idle, "loaded_s": load, "loaded_median_s": statistics.median(loaded),
            "ratio": load / idle, "bound_s": 2 * idle + 2,
            "within": load <= 2 * idle + 2, "overlapped": overlapped,
            "idle_range_s": [min(before + after), max(before + after)],
            "loaded_range_s": [min(loaded), max(loaded)]}


def measure(url: str, heavy_cfg: dict, reps: int = 3, lead_s: float = 5.0, n: int = 3,
            heavies: int = 2) -> list[dict]:
    from gradio_client import Client

    ordinary(Client(url, verbose=False), 2)        # warm-up: models and audio stack loaded
    return [one_rep(url, heavy_cfg, lead_s, n, heavies) for _ in range(reps)]


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--host", default="0.0.0.0", help="0.0.0.0: the network caps; 127.0.0.1: loopback's")
    p.add_argument("--heavies", type=int, default=2, help="visitors decoding at the caps at once")
    p.add_argument("--lead-s", type=float, default=5.0,
                   help="seconds the runs at the caps have been going when the ordinary run starts")
    p.add_argument("--n", type=int, default=3, help="ordinary runs per measurement (median)")
    p.add_argument("--json", help="also write the numbers here")
    a = p.parse_args(argv)
    cfg = heavy_config(a.host)
    print(f"load average before: {load_average()} ({os.cpu_count()} CPUs)")
    with serve(a.host) as (url, _proc):
        rows = measure(url, cfg, a.reps, a.lead_s, a.n, a.heavies)
    for i, r in enumerate(rows, 1):
        print(f"rep {i}: ordinary run {r['idle_s']:.2f} s idle (median of {2 * a.n}, "
              f"{r['idle_range_s'][0]:.2f}-{r['idle_range_s'][1]:.2f}), {r['loaded_s']:.2f} s beside "
              f"{a.heavies} runs at the caps (slowest of {a.n}; median {r['loaded_median_s']:.2f}) "
              f"-> {r['ratio']:.2f}x; bound 2 x idle + 2 s = {r['bound_s']:.2f} s: "
              + ("within" if r["within"] else "OVER") + ("" if r["overlapped"] else " (a heavy run had ended)"))
    ratios, loaded = [r["ratio"] for r in rows], [r["loaded_s"] for r in rows]
    print(f"heavy runs: {a.heavies} x {json.dumps(cfg)}, cloud-only baseline on")
    print(f"loaded {min(loaded):.2f}-{max(loaded):.2f} s, ratio {min(ratios):.2f}x-{max(ratios):.2f}x "
          f"over {len(rows)} reps; within 2 x idle + 2 s: {sum(r['within'] for r in rows)}/{len(rows)}")
    print(f"load average after: {load_average()}")
    if a.json:
        Path(a.json).write_text(json.dumps({"config": cfg, "heavies": a.heavies, "reps": rows}, indent=1))
    return 0 if all(r["within"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
