"""The real llama.cpp server for the audit tests: `make cloud-llama` on a free port.

llama-server is built from source once per machine (scripts/cloud/llama.sh caches it under
~/.cache/specscope; `make test` starts that build in the background, and this waits on its
lock); a machine where it cannot be built skips the tests that need the server, saying why.
"""
from __future__ import annotations

import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from cloud_server import SUITE_BUILD_WAIT_S, CloudServer, build_wait

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "cloud" / "llama.sh"
BUILD_TIMEOUT = 1500      # a fresh machine builds in the background beside the suite; past this the tests skip (saying so)


def build_llama() -> str:
    """llama-server's path, building it (and converting the demo pair) if needed; skips the
    caller when it can't."""
    t0 = time.time()
    wait = build_wait(BUILD_TIMEOUT)
    try:
        p = subprocess.run([str(SCRIPT), "convert"], capture_output=True, text=True,
                           timeout=wait, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.skip(f"llama-server did not build within {wait:.0f} s (the suite waits for a "
                    f"background build until {SUITE_BUILD_WAIT_S:.0f} s after its start)")
    if p.returncode != 0:
        tail = [ln for ln in p.stderr.splitlines() if ln.strip() and "is ignored" not in ln][-3:]
        pytest.skip("llama-server cannot be built on this machine: " + " | ".join(tail))
    print(f"llama-server and the demo GGUFs ready in {time.time() - t0:.0f} s")
    return p.stdout.strip()


class LlamaServer(CloudServer):
    """`make cloud-llama CLOUD_PORT=<free port> [SPEC_DRAFT=DIR|none] [LLAMA_EXTRA_ARGS=...]`,
    started and stopped as the vLLM one (its own process group)."""

    def __init__(self, log_dir: Path, draft: str | Path | None = None, extra: str = ""):
        super().__init__(log_dir, ("cloud-llama",) + ((f"SPEC_DRAFT={draft}",) if draft else ())
                         + ((f"LLAMA_EXTRA_ARGS={extra}",) if extra else ()))

    def ready(self) -> bool:
        """/health answers 200 once the model is loaded, with or without --api-key (whose server
        answers 401 to /v1/models: polling that waited out the whole start timeout)."""
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False
