"""Named endpoints for gradio_client (run, run_stream, batch); errors come back as one line.
Declared with gr.api, typed by the handlers' signatures: no `from __future__ import annotations`
here (gr.api counts a handler's outputs from its evaluated return annotation).

    from gradio_client import Client
    c = Client("http://127.0.0.1:7860/")
    result, text = c.predict("angry_01", None, '{"k": 6}', "demo", False, api_name="/run")"""
import json
import threading
from pathlib import Path

import anyio
import gradio as gr
from gradio import FileData

from specdec_core.caps import cap_config
from specdec_core.decoding.config import DecodeConfig
from specdec_core.errors import UserError
from specdec_core.evaluation.batch.run import iter_batch
from specdec_core.evaluation.batch.manifest import clips_from_uploads, read_manifest

from . import common
from .limits import ADMIT
from .runs import Run
from .gpu import gpu


def _start(sample, audio, config_json, backend_name, session, cancel) -> Run:
    cfg = DecodeConfig.from_json(config_json) if (config_json or "").strip() else DecodeConfig()
    src, name = common.resolve_audio(sample or None, audio)
    return Run(common.get_backend(backend_name), src, cfg, session, name, cancel=cancel)


async def in_worker(fn, *args):
    """Run the blocking fn(*args, cancel) in a worker thread. When Gradio cancels this call (a
    client's cancel, /cancel), the await ends at once and the `finally` sets the Event, so the
    decode stops within one round instead of running on unseen."""
    cancel = threading.Event()
    try:
        return await anyio.to_thread.run_sync(fn, *args, cancel, abandon_on_cancel=True)
    finally:
        cancel.set()


@gpu
def _run(sample, audio, config_json, backend_name, baseline, session, cancel):
    try:
        res = _start(sample, audio, config_json, backend_name, session, cancel).to_end().result(baseline)
        return res, res["text"]
    except Exception as e:  # noqa: BLE001
        common.api_error(e)


async def api_run(sample: str = "", audio: FileData | None = None, config_json: str = "", backend_name: str = "demo",
                  baseline: bool = False, request: gr.Request = None) -> tuple[dict, str]:
    """Decode one clip (sample name, or an uploaded file) -> (result entry with trace, text)."""
    return await in_worker(_run, sample, audio, config_json, backend_name, baseline,
                           common.session_of(request))


@gpu
def api_run_stream(sample: str = "", audio: FileData | None = None, config_json: str = "", backend_name: str = "demo",
                   baseline: bool = False, request: gr.Request = None) -> tuple[dict, str]:   # per yield: gr.api counts outputs
    """Streaming: a partial update per round, then the result; a cancel closes it within one round."""
    try:
        run = _start(sample, audio, config_json, backend_name, common.session_of(request), None)
        for live, new in run:
            if live.done:
                break
            if live.trace["rounds"]:
                yield ({"done": False, "round": len(live.trace["rounds"]), "n_tokens": live.n_tokens,
                        "text": live.text(), "new_warnings": new}, live.text())
        res = run.result(baseline)
        yield {"done": True, **res}, res["text"]
    except Exception as e:  # noqa: BLE001
        common.api_error(e)


def batch_limit(limit) -> int | None:
    """The API's `limit` (first N clips, 0 = all) checked: never a silent slice."""
    if limit is None or limit == "":
        return None
    try:
        n = float(limit)
    except (TypeError, ValueError):
        raise UserError(f"limit must be a whole number of clips (0 = all), got {limit!r}") from None
    if n < 0 or not n.is_integer():
        raise UserError(f"limit must be 0 (all clips) or a positive whole number, got {limit:g}")
    return int(n) or None


@gpu
def _batch(config_json, config_b_json, limit, manifest, clips, backend_name, session, cancel):
    try:
        sides = common.side_configs((("A", config_json), ("B", config_b_json))[: 1 + bool((config_b_json or "").strip())])
        configs = {k: cap_config(c) for k, c in sides.items()}
        n = batch_limit(limit)
        items = clips_from_uploads(manifest, clips) if (manifest or clips) else read_manifest(common.MANIFEST)
        items = items[:n] if n else items
        with common.running(session, cancel):
            for ev in iter_batch(common.get_backend(backend_name), items, configs, cancel=cancel):
                if ev["type"] == "done":
                    d = ev["result"].to_dict()
                    d["rows"] = [{k: v for k, v in r.items() if k != "trace"} for r in d["rows"]]
                    return names_only(d, [manifest, *clips])
    except Exception as e:  # noqa: BLE001
        common.api_error(e)


def names_only(d: dict, uploads) -> dict:
    """A batch answer with each upload's server path replaced by its file name (issue 36)."""
    text = json.dumps(d, ensure_ascii=False)
    for p in sorted({str(q) for u in uploads if u for q in (u, Path(u).resolve())}, key=len, reverse=True):
        text = text.replace(json.dumps(p)[1:-1], Path(p).name)
    dirs = {str(Path(u).resolve().parent) for u in uploads if u}
    for folder in sorted(dirs, key=len, reverse=True):
        text = text.replace(json.dumps(folder + "/")[1:-1], "")
    return json.loads(text)


async def api_batch(config_json: str = "", config_b_json: str = "", limit: float = 0, manifest: FileData | None = None,
                    clips: list[FileData] | None = None, backend_name: str = "demo", request: gr.Request = None) -> dict:
    """Batch over the bundled manifest (or an uploaded CSV + clips) -> summary, checklist, rows."""
    return await in_worker(_batch, config_json, config_b_json, limit, common.upload_path(manifest),
                           [common.upload_path(c) for c in clips or []], backend_name, common.session_of(request))


def add_api() -> None:
    kw = dict(concurrency_id="decode", concurrency_limit=ADMIT)
    for fn, name in ((api_run, "run"), (api_run_stream, "run_stream"), (api_batch, "batch")):
        gr.api(fn, api_name=name, **kw)
