"""A bounded loopback load test of a shared server (issue 37): the app served as on a Space
(0.0.0.0, the default caps of specdec_core/caps.py), one visitor decoding at the caps (max new
tokens and time limit at their caps, k 32, the special_text_stop fault so no stop fires, the
cloud-only baseline on) while another visitor does an ordinary run. Prints the ordinary run's
time under load over its idle time, per repetition (idle and loaded interleaved) and the range.

    python scripts/load_test.py [--reps 3] [--n 3] [--host 0.0.0.0] [--lead-s 5] [--json out.json]

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
def serve(host: str = "0.0.0.0", env: dict | None = None, timeout: float = 180.0):
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


def one_rep(url: str, heavy_cfg: dict, lead_s: float, n: int = 3, finish_heavy: bool = False) -> dict:
    """The ordinary run's idle time, then its time while another visitor runs at the caps
    (started lead_s before it); each the median of n runs. The heavy run is stopped after, or
    awaited (finish_heavy)."""
    from gradio_client import Client

    ordn, heavy = (Client(url, verbose=False, httpx_kwargs={"timeout": 300}) for _ in range(2))
    idle = ordinary(ordn, n)
    job = heavy.submit(SAMPLE, None, json.dumps(heavy_cfg), "demo", True, api_name="/run")
    time.sleep(lead_s)
    loaded = ordinary(ordn, n)
    overlapped = not job.done()
    out = {"idle_s": idle, "loaded_s": loaded, "ratio": loaded / idle, "overlapped": overlapped}
    if finish_heavy:
        out["heavy"] = job.result()[0]
    else:
        heavy.predict(api_name="/live_stop")      # the heavy visitor's Stop: ends within a round
        with contextlib.suppress(Exception):
            job.result(timeout=60)
    return out


def measure(url: str, heavy_cfg: dict, reps: int = 3, lead_s: float = 5.0, n: int = 3) -> list[dict]:
    from gradio_client import Client

    ordinary(Client(url, verbose=False), 2)        # warm-up: models and audio stack loaded
    return [one_rep(url, heavy_cfg, lead_s, n) for _ in range(reps)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--host", default="0.0.0.0", help="0.0.0.0: the network caps; 127.0.0.1: loopback's")
    p.add_argument("--lead-s", type=float, default=5.0,
                   help="seconds the run at the caps has been going when the ordinary run starts")
    p.add_argument("--n", type=int, default=3, help="ordinary runs per measurement (median)")
    p.add_argument("--json", help="also write the numbers here")
    a = p.parse_args(argv)
    cfg = heavy_config(a.host)
    with serve(a.host) as (url, _proc):
        rows = measure(url, cfg, a.reps, a.lead_s, a.n)
    for i, r in enumerate(rows, 1):
        print(f"rep {i}: ordinary run (median of {a.n}) {r['idle_s']:.2f} s idle, {r['loaded_s']:.2f} s beside a run "
              f"at the caps -> {r['ratio']:.2f}x" + ("" if r["overlapped"] else " (heavy run had ended)"))
    ratios = [r["ratio"] for r in rows]
    print(f"heavy run: {json.dumps(cfg)}, cloud-only baseline on")
    print(f"ratio range: {min(ratios):.2f}x – {max(ratios):.2f}x over {len(rows)} reps (bound 2x)")
    if a.json:
        Path(a.json).write_text(json.dumps({"config": cfg, "reps": rows}, indent=1))
    return 0 if max(ratios) < 2 else 1


if __name__ == "__main__":
    sys.exit(main())
