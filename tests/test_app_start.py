"""`python app.py` on a busy machine: Gradio's launch() gives up when its own URL misses one 3 s
HEAD (it raises "When localhost is not accessible ..."). app.py starts again (at most 3 times)
instead of exiting. Here the first check is made to fail, as a loaded machine makes it fail:
the real app must still serve its page."""
import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent('''
    import os, runpy, sys, threading, time
    import httpx
    import gradio.networking as n
    real, calls = n.url_ok, []
    def once(url):
        calls.append(url)
        return False if len(calls) == 1 else real(url)
    n.url_ok = once
    PORT = sys.argv[1]
    os.environ.update(GRADIO_SERVER_PORT=PORT, GRADIO_SERVER_NAME="127.0.0.1")
    def probe():
        for _ in range(600):
            time.sleep(0.5)
            try:
                if len(calls) >= 2 and httpx.get(f"http://127.0.0.1:{PORT}/config", timeout=10).status_code == 200:
                    sys.stdout.write(f"SERVED after {len(calls)} checks\\n")    # one write: Gradio's
                    sys.stdout.flush()                                           # prints interleave
                    os._exit(0)
            except httpx.HTTPError:
                pass
        os._exit(3)
    threading.Thread(target=probe, daemon=True).start()
    sys.argv = ["app.py"]
    runpy.run_path("app.py", run_name="__main__")
''')


def test_app_starts_again_when_gradios_start_up_check_misses(tmp_path):
    from browser_util import free_port

    script = tmp_path / "flaky_check.py"
    script.write_text(SCRIPT, encoding="utf-8")
    p = subprocess.run([sys.executable, str(script), str(free_port())], cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    served = re.search(r"SERVED after (\d+) checks", out)     # 2, or more where the load made a
    assert served and int(served.group(1)) >= 2, out[-3000:]  # later check miss too
    assert "starting again" in out and "Traceback" not in out
