"""The app on a GPU: app.py serves the omni backend on the tiny random-init Qwen2.5-Omni thinker
pair (devtools/omni_tiny.py, written at start, no weights downloaded), and a real gradio_client
calls /run (with the cloud-only baseline) and /run_stream for a greedy, a sampled and a graphed
config, and nvidia-smi lists the app's pid among the GPU's processes.
Prints and writes what came back: tokens, acceptance, whether the greedy run equals its
baseline, the judged decode's finding codes, and the one-line error of a call that failed.

    .venv/bin/python scripts/gpu_app_check.py [--out FILE] [--dtype bfloat16]

On a machine without CUDA the app runs the pair on the CPU (SPECSCOPE_OMNI_FORCE_CPU=1): that
checks the script, not the GPU.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CONFIGS = {"greedy": {"k": 4, "max_new_tokens": 24, "temperature": 0.0, "verify": "greedy"},
           "sampled": {"k": 4, "max_new_tokens": 24, "temperature": 0.8, "verify": "sampling", "seed": 1},
           # CUDA graphs (decoding/engine.py); on a CPU the app refuses it in one line.
           "graphs": {"k": 4, "max_new_tokens": 24, "temperature": 0.0, "verify": "greedy", "engine": "graphs"}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, proc: subprocess.Popen, log: Path) -> None:
    """Until the app answers (the first start loads torch, Gradio and the warm-up)."""
    while proc.poll() is None:
        try:
            urllib.request.urlopen(url, timeout=5)
            return
        except OSError:
            time.sleep(2)
    raise SystemExit(f"app.py exited ({proc.returncode}):\n{log.read_text()[-3000:]}")


def entry(res: dict) -> dict:
    """What one /run result says: tokens, acceptance, baseline equality, finding codes."""
    m, tr = res.get("metrics") or {}, res.get("trace") or {}
    return {"ok": res.get("ok"), "tokens": len(res.get("token_ids") or []),
            "acceptance": m.get("acceptance_rate"), "cloud_calls": m.get("cloud_calls"),
            "matches_baseline": m.get("matches_baseline"),
            "findings": sorted({f"{d.get('severity')}:{d.get('code')}" for d in tr.get("diagnostics") or []}),
            "engine": (tr.get("info") or {}).get("engine"), "dtype": (tr.get("info") or {}).get("dtype"),
            "warnings": [w.get("message", "")[:160] for w in tr.get("warnings") or [] if w.get("kind") != "cycle"]}


def gpu_processes() -> str | None:
    """nvidia-smi's compute processes (pid, memory): the app's own pid there is the proof that it
    ran on the GPU. None without nvidia-smi."""
    try:
        return subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv"],
                              capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "test-artifacts" / "gpu_app_check.json"))
    ap.add_argument("--dtype", default=None, help="SPECSCOPE_DTYPE for the app (default: the backend's)")
    args = ap.parse_args(argv)
    import torch
    from gradio_client import Client

    from devtools.omni_tiny import make_tiny_pair

    out = {"cuda": torch.cuda.is_available(), "dtype": args.dtype, "calls": {}}
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_tiny_pair(tmp)
        port, log = free_port(), Path(tmp) / "app.log"
        env = {**os.environ, "SPECSCOPE_EDGE_MODEL": str(paths["edge"]),
               "SPECSCOPE_CLOUD_MODEL": str(paths["cloud"]), "GRADIO_SERVER_PORT": str(port),
               "GRADIO_SERVER_NAME": "127.0.0.1",
               "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
        if not out["cuda"]:
            env["SPECSCOPE_OMNI_FORCE_CPU"] = "1"
        if args.dtype:
            env["SPECSCOPE_DTYPE"] = args.dtype
        url = f"http://127.0.0.1:{port}/"
        with open(log, "w") as fh:
            proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=fh,
                                    stderr=subprocess.STDOUT)
        try:
            wait_up(url, proc, log)
            client = Client(url, verbose=False)
            for name, cfg in CONFIGS.items():
                for api in ("/run", "/run_stream"):
                    key, t = f"{name} {api}", time.perf_counter()
                    try:
                        job = client.submit("angry_01", None, json.dumps(cfg), "omni", api == "/run",
                                            api_name=api)
                        res, _text = job.result()
                        out["calls"][key] = {**entry(res), "updates": len(job.outputs()),
                                             "seconds": round(time.perf_counter() - t, 2)}
                    except Exception as e:  # noqa: BLE001 - the app's one-line error is the result
                        out["calls"][key] = {"ok": False, "error": str(e).splitlines()[0][:300]}
                    print(key, json.dumps(out["calls"][key], ensure_ascii=False), flush=True)
            out["app_pid"], out["gpu_processes"] = proc.pid, gpu_processes()
            print("app pid", proc.pid, "GPU processes:", out["gpu_processes"], flush=True)
        finally:
            proc.terminate()
            proc.wait(30)
        out["app_log_tail"] = log.read_text()[-2000:]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1, ensure_ascii=False))
    print("wrote", args.out)
    return 0 if all(c.get("ok") for c in out["calls"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
