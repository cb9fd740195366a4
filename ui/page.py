"""The whole page: three tabs, the API endpoints, CSS and launch settings."""
from __future__ import annotations

import os

import gradio as gr

from components import ALL_CSS

PAGE_CSS = """
.gradio-container { max-width: 1480px !important; }
.ss-title h1 { margin: 0 0 2px 0; font-size: 24px; }
.ss-title p { margin: 0; color: #57606a; }
.ss-h h3 { margin: 6px 0 0 0; font-size: 15px; color: #1f2328; }
.ss-status { display: flex; align-items: baseline; gap: 10px; padding: 8px 12px; border-radius: 8px;
  font-family: system-ui, sans-serif; font-size: 14.5px; background: #f6f8fa; border: 1px solid #d8dee4; }
.ss-status-icon { font-weight: 700; }
.ss-status-text { font-weight: 600; }
.ss-status-detail { color: #57606a; font-variant-numeric: tabular-nums; }
.ss-status-run { background: #eef6fc; border-color: #9cc8e8; }
.ss-status-run .ss-status-icon { color: #0072B2; }
.ss-status-ok { background: #edf8f3; border-color: #9fd9c2; }
.ss-status-ok .ss-status-icon { color: #009E73; }
.ss-status-err { background: #fff1e8; border-color: #f0b48c; }
.ss-status-err .ss-status-icon { color: #D55E00; }
.ss-status-warn { background: #fff8e1; border-color: #e6c770; }
.ss-status-warn .ss-status-icon { color: #B8860B; }
.ss-tokens-panel { border: 1px solid #d8dee4; border-radius: 8px; padding: 10px 12px !important;
  min-height: 120px; background: #fff; overflow: visible !important; }
.ss-ab-head { font-weight: 650; font-size: 16px; }
/* gradio's prose colours override the tooltip's light text on its dark box */
.ss-tip, .ss-tip .ss-tip-v, .ss-tip .ss-tip-head, .ss-tip .ss-tip-top { color: #f6f8fa !important; }
.ss-tip .ss-tip-alt { color: #d0d7de !important; }
#batch-status .ss-status { min-height: 48px; box-sizing: border-box; }
.ss-note p { font-size: 12.5px; color: #57606a; margin: 0; }
.ss-batch-checks { display: flex; flex-direction: column; gap: 10px; }
.ss-batch-check h4 { margin: 0 0 4px 0; font-size: 14px; }
"""


def build_demo() -> gr.Blocks:
    from .ab import ABTab
    from .api import add_api
    from .batch import BatchTab
    from .live import LiveTab

    from specdec_core.caps import serve_app

    from . import common

    serve_app()   # the operator's caps follow where the app serves (specdec_core/caps.py)
    common.sturdy_cache_cleanup()
    # uploads and served result files older than CACHE_MAX_AGE_S go every CACHE_EVERY_S
    clean = (max(1, int(common.CACHE_EVERY_S)), max(1, int(common.CACHE_MAX_AGE_S)))
    with gr.Blocks(title="SpecScope — speculative decoding debugger", delete_cache=clean) as demo:
        gr.Markdown("# SpecScope\nWatch an edge model draft and a cloud model verify, token by token: "
                    "tune the speculative decoder on emotion clips, compare configurations, "
                    "and check a change on a batch.", elem_classes="ss-title")
        with gr.Tabs():
            with gr.Tab("Live", id="live"):
                live = LiveTab()
            with gr.Tab("A/B", id="ab"):
                ABTab(live)
            with gr.Tab("Batch", id="batch"):
                BatchTab(live)
            with gr.Tab("Inspect", id="inspect"):
                from .inspect import InspectTab
                InspectTab()
        add_api()
        demo.load(live.on_load, None, live.load_outputs, api_visibility="private")
    return demo


def launch_kwargs() -> dict:
    from . import common

    return {"server_name": os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"),
            "server_port": int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
            "css": ALL_CSS + PAGE_CSS, "theme": gr.themes.Default(primary_hue="blue"),
            "show_error": True, "max_file_size": common.MAX_FILE_SIZE,
            # the guides the page links (Inspect: docs/recorder.md), served from this repository
            "allowed_paths": [str(common.ROOT / "docs")]}


def queued(demo: gr.Blocks) -> gr.Blocks:
    # 2 CPU-bound decodes at a time: more only slows every user down on a small machine.
    from .limits import install

    demo = demo.queue(default_concurrency_limit=2, max_size=32)
    install(demo._queue)      # runs per session, the waiting line (ui/limits.py)
    return demo
