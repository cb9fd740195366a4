"""Issue 47 (4): findings are drawn by one renderer (components/findings.findings_html) on every
tab. A real Live run with a fault, its findings drawn by the Live tab and, the same list, by the
Inspect tab: the same HTML; and no second renderer is left in components/ or ui/."""
from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tabs():
    from ui.inspect import InspectTab
    from ui.live import LiveTab

    with gr.Blocks():
        live = LiveTab()
        inspect = InspectTab()
    return live, inspect


def _values(panel, cfg: dict) -> list:
    """What the browser sends for `cfg`: one value per widget of panel.inputs."""
    from specdec_core.decoding.config import KNOBS

    full = {**{n: KNOBS[n].default for n in panel.names}, **cfg}
    return [full[n] if full[n] is not None else 0.0 for n in panel.names] + [full[n] is None for n in panel.off]


def test_live_and_inspect_draw_the_same_findings_identically(tabs):
    live, inspect = tabs
    knobs = _values(live.panel, {"faults": ["no_resync"], "max_new_tokens": 24})
    *_, final = live.run(SimpleNamespace(session_hash="render"), "sad_01", None, "demo", False, "", *knobs)
    live_html = final[live.outputs.index(live.diagnostics)]
    with open(final[live.outputs.index(live.dl_trace)]["value"], encoding="utf-8") as f:
        trace = json.load(f)
    found = trace["diagnostics"]
    assert any(f["severity"] == "error" and f["evidence"] for f in found), found
    # the Inspect tab shows the same findings list (as if recorded): its findings panel
    res = {"trace": trace, "recording": {"forwards": [{"model": "cloud", "i": 0}]}, "findings": found,
           "ok": True, "error": None}
    inspect_html = inspect._show(res, "same")[2]
    assert live_html == inspect_html
    assert 'class="ss-finding ss-sev-error"' in live_html and "evidence:" in live_html
    assert "«" in live_html                                  # token ids with their text on both tabs


def test_one_renderer_is_left():
    """The old Live renderer is gone, and no other product module draws finding cards."""
    import components.cards as cards

    assert not hasattr(cards, "diagnostics_html") and not hasattr(cards, "findings_summary")
    drawers = [p.relative_to(ROOT).as_posix() for d in ("components", "ui") for p in (ROOT / d).rglob("*.py")
               if re.search(r"ss-finding[ \"-]|data-severity=|ss-rf-card", p.read_text(encoding="utf-8"))]
    assert drawers == ["components/findings.py"], drawers
