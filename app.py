"""SpecScope: `python app.py` serves the debugging page on 0.0.0.0:7860 (GRADIO_SERVER_PORT to
change it). Importing this module builds the page without launching it (tests, Spaces).

Limits for a shared Space: the operator's caps (max new tokens, time per run, runs per session,
recording size) are environment variables with one home, specdec_core/caps.py, and safe defaults
when the app serves the network (docs/space.md); --time-limit-s sets SPECSCOPE_TIME_LIMIT_S.
SPECSCOPE_MAX_FILE_SIZE caps an upload (default 20mb), SPECSCOPE_CACHE_EVERY_S /
SPECSCOPE_CACHE_MAX_AGE_S clean old uploads and exports.
Cloud servers (the Live tab's remote cloud): only those in SPECSCOPE_CLOUD_URLS (comma-separated);
without that list, a free-form URL only when serving on loopback (`make demo`) or with
SPECSCOPE_ALLOW_ANY_CLOUD_URL=1 (specdec_core/backends/cloud_policy.py, docs/remote.md).
"""
import argparse
import os

from ui.common import warm_up
from ui.page import build_demo, launch_kwargs, queued

demo = queued(build_demo())

if __name__ == "__main__":
    p = argparse.ArgumentParser(description="SpecScope web app")
    p.add_argument("--time-limit-s", type=float, default=None,
                   help="cap every decode's wall time in seconds (0 = the knob decides); "
                        "the same as SPECSCOPE_TIME_LIMIT_S")
    args = p.parse_args()
    if args.time_limit_s is not None:
        os.environ["SPECSCOPE_TIME_LIMIT_S"] = str(max(0.0, args.time_limit_s))
    warm_up()
    for attempt in range(3):
        try:
            demo.launch(**launch_kwargs())
            break
        except ValueError as e:   # Gradio gives up when its own URL misses one 3 s HEAD (a busy
            if "localhost is not accessible" not in str(e) or attempt == 2:   # machine): again
                raise
            print("the page did not answer Gradio's start-up check in 3 s (busy machine); starting again",
                  flush=True)
            demo.close()
