"""SpecScope: `python app.py` serves the debugging page on 0.0.0.0:7860 (GRADIO_SERVER_PORT to
change it). Importing this module builds the page without launching it (tests, Spaces).

Limits for a shared Space (environment, or the flags below): SPECSCOPE_TIME_LIMIT_S caps every
decode's wall time (0 = the time_limit_s knob decides), SPECSCOPE_MAX_FILE_SIZE caps an upload
(default 20mb), SPECSCOPE_CACHE_EVERY_S / SPECSCOPE_CACHE_MAX_AGE_S clean old uploads and exports,
SPECSCOPE_MAX_QUEUED_PER_SESSION caps one visitor's queued or running decodes (default 4),
SPECSCOPE_MAX_RECORDING_MB / _FORWARDS / _IDS cap an uploaded recording (recorder/validate.py).
Cloud servers (the Live tab's remote cloud): only those in SPECSCOPE_CLOUD_URLS (comma-separated);
without that list, a free-form URL only when serving on loopback (`make demo`) or with
SPECSCOPE_ALLOW_ANY_CLOUD_URL=1 (specdec_core/backends/cloud_policy.py, docs/remote.md).
"""
import argparse

from ui import common
from ui.common import warm_up
from ui.page import build_demo, launch_kwargs, queued

demo = queued(build_demo())

if __name__ == "__main__":
    p = argparse.ArgumentParser(description="SpecScope web app")
    p.add_argument("--time-limit-s", type=float, default=None,
                   help="cap every decode's wall time in seconds (0 = the knob decides)")
    args = p.parse_args()
    if args.time_limit_s is not None:
        common.TIME_CAP_S = max(0.0, args.time_limit_s)
    warm_up()
    demo.launch(**launch_kwargs())
