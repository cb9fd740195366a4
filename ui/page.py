"""The whole page: three tabs, the API endpoints, CSS and launch settings."""
from __future__ import annotations

import os
from pathlib import Path

import gradio as gr

from components import ALL_CSS

PAGE_CSS = (Path(__file__).parent / "page.css").read_text(encoding="utf-8")


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
            "css": ALL_CSS + "\n" + PAGE_CSS, "theme": gr.themes.Default(primary_hue="blue"),
            "show_error": True, "max_file_size": common.MAX_FILE_SIZE,
            # the guides the page links (Inspect: docs/recorder.md), served from this repository
            "allowed_paths": [str(common.ROOT / "docs")]}


def queued(demo: gr.Blocks) -> gr.Blocks:
    # 2 CPU-bound decodes at a time: more only slows every user down on a small machine.
    from .limits import install

    demo = demo.queue(default_concurrency_limit=2, max_size=32)
    install(demo._queue)      # runs per session, the waiting line (ui/limits.py)
    return demo
