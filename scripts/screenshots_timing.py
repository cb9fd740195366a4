"""Screenshots of the timing picture (issue 20 item 2) for docs/img/, through the real app and
Debian chromium (Playwright):

  timing_live.png              the Live tab after a run of the default clip (our decoder)
  timing_inspect.png           the Inspect tab for an uploaded recording of
                               examples/decoders/slow_decode_text.py (recorded here first)
  timing_inspect_findings.png  the findings of that recording (loop_overhead)

    PYTHONPATH=. python scripts/screenshots_timing.py [--out docs/img]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from browser_util import app_process, launch_chromium, wait_state  # noqa: E402

CLIP = ROOT / "sample_audio" / "angry_01.wav"


def record(name: str, out: Path) -> Path:
    import torch

    from specdec_core.backends import load_backend
    from specdec_core.recorder import DEFAULTS, load_function, record_clip

    torch.set_num_threads(1)
    fn, path = load_function(f"{ROOT}/examples/decoders/{name}.py:decode")
    res = record_clip(fn, path, load_backend("demo"), CLIP, dict(DEFAULTS))
    out.write_text(json.dumps({"backend": "demo", "results": [res]}, ensure_ascii=False), encoding="utf-8")
    print(f"recorded {name}: {res['time_split']}", file=sys.stderr)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "docs" / "img"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        rec = record("slow_decode_text", Path(tmp) / "slow_decode_text.json")
        with app_process(log_name="screenshots-timing.log") as (url, _), sync_playwright() as p:
            browser = launch_chromium(p)
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.goto(url)
            page.wait_for_selector("#live-run")
            page.click("#live-run")
            assert wait_state(page, "live-status", timeout=180_000) == "ok", page.inner_text("#live-status")
            page.wait_for_selector("#live-timing .bars path", timeout=30_000)
            page.locator("#live-timing").scroll_into_view_if_needed()
            page.locator("#live-timing").screenshot(path=str(out / "timing_live.png"))

            page.get_by_role("tab", name="Inspect").click()
            page.wait_for_selector("#inspect-upload")
            page.locator("#inspect-upload input[type=file]").set_input_files(str(rec))
            wait_state(page, "inspect-status", timeout=120_000)
            page.wait_for_selector("#inspect-timing .bars path", timeout=30_000)
            page.locator("#inspect-timing").scroll_into_view_if_needed()
            page.locator("#inspect-timing").screenshot(path=str(out / "timing_inspect.png"))
            page.locator("#inspect-findings").screenshot(path=str(out / "timing_inspect_findings.png"))
            browser.close()
    for n in ("timing_live", "timing_inspect", "timing_inspect_findings"):
        print(out / f"{n}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
