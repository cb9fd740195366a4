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

    from . import common

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
            "css": ALL_CSS + PAGE_CSS + _inspect_css(), "theme": gr.themes.Default(primary_hue="blue"),
            "show_error": True, "max_file_size": common.MAX_FILE_SIZE}


def _inspect_css() -> str:
    from components.findings import FINDINGS_CSS
    from components.inspect_view import INSPECT_CSS
    return FINDINGS_CSS + INSPECT_CSS


def queued(demo: gr.Blocks) -> gr.Blocks:
    # 2 CPU-bound decodes at a time: more only slows every user down on a small machine.
    demo = demo.queue(default_concurrency_limit=2, max_size=32)
    limit_per_session(demo._queue)
    return demo


def max_queued_per_session() -> int:
    return int(os.environ.get("SPECSCOPE_MAX_QUEUED_PER_SESSION", "4"))


def session_runs(queue, session: str | None, cid: str = "decode") -> int:
    """Decode runs of this session waiting in the queue or running now."""
    waiting = getattr(queue.event_queue_per_concurrency_id.get(cid), "queue", [])
    running = [e for job in queue.active_jobs if job for e in job]
    return sum(e.session_hash == session and e.concurrency_id == cid for e in [*waiting, *running])


def limit_per_session(queue) -> None:
    """One client cannot fill the queue (issue 36): a session's decode run beyond
    SPECSCOPE_MAX_QUEUED_PER_SESSION (waiting or running) is refused with a message; other
    visitors keep their places."""
    push = queue.push

    async def guarded(body, request, username):
        from gradio import route_utils

        fn = route_utils.get_fn(queue.blocks, None, body) if body.fn_index is not None else None
        cap = max_queued_per_session()
        if fn is not None and fn.concurrency_id == "decode" and session_runs(queue, body.session_hash) >= cap:
            return (False, f"You already have {cap} runs queued or running: wait for one to finish "
                    "(or stop one) before starting another.", "error")
        return await push(body, request, username)

    queue.push = guarded
