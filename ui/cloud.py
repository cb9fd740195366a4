"""The cloud server field as the operator's policy allows it (issue 30; rules: backends/cloud_policy.py).
Every handler applies `checked_cloud_url` to the value it receives (the widget is no guard)."""
from __future__ import annotations

import gradio as gr

from specdec_core.backends.cloud_policy import NONE, cloud_policy

ELEM_ID = "live-cloud-url"
LABEL = "cloud server URL (optional)"


def cloud_url_widget(elem_id: str = ELEM_ID, label: str | None = None, policy=None, info: str = "", **kw):
    p = policy or cloud_policy()
    if p.mode == "list":
        # allow_custom_value: a value outside the list reaches checked_cloud_url, which refuses it
        # with its own message (not typeable here: filterable=False)
        return gr.Dropdown(p.choices(), value=NONE, label=label or "cloud server", info=info or p.why,
                           allow_custom_value=True, filterable=False, elem_id=elem_id, **kw)
    if p.mode == "free":
        return gr.Textbox(value="", label=label or LABEL, max_lines=1, elem_id=elem_id,
                          placeholder="http://127.0.0.1:8000", **kw,
                          info=info or "blank: the cloud runs in this process; a URL verifies on a vLLM "
                               "server (make cloud starts one here): the edge stays here, one request per block")
    return gr.Textbox(value="", label=label or LABEL, max_lines=1, elem_id=elem_id, interactive=False,
                      placeholder="off: the cloud runs in this process", info=f"off: {p.why}", **kw)


def checked_cloud_url(value) -> str | None:
    """The URL to connect to, or None (the cloud in the process); a refused value raises one line."""
    return cloud_policy().resolve(value)
