"""The Batch tab: a manifest x one or two configurations, progress, tables, checklists, plots, export."""
from __future__ import annotations

import threading

import gradio as gr

from components.batch_view import (aggregate_frame, aggregate_html, aggregate_placeholder, checklist_html,
                                   checklists_html,
                                   columns_help, label_matrix_html, numeric_frame, results_table)
from components.plots import batch_distributions
from components.status import status_html
from specdec_core.caps import cap_config
from specdec_core.decoding.config import DecodeConfig
from specdec_core.errors import UserError
from specdec_core.evaluation.batch.run import iter_batch
from specdec_core.evaluation.batch.edges import SPEC_KEYS
from specdec_core.evaluation.batch.scale import ENGINES, run_batch_dir
from specdec_core.evaluation.batch.manifest import clips_from_uploads, read_manifest, spread_labels

from . import common, limits
from .gpu import gpu

BUNDLED, UPLOAD = "bundled samples", "upload CSV + clips"
DEFAULT_LIMIT = 6
MAX_WORKERS = 8
_RAY_LOCK = threading.Lock()
# Measured once on this machine (2 shared CPU cores, demo backend): a one-clip batch took 17.6 s
# on Ray with 2 workers and 0.2 s on the local engine (warm), so Ray's start-up is ~17 s.
RAY_START_S = 17


class BatchTab:
    def __init__(self, live):
        self.live = live
        n_samples = max(1, common.manifest_size())   # the bundled manifest's rows, no more
        labels = common.manifest_labels()
        default_json = DecodeConfig().to_json(indent=1)
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=300):
                self.source = gr.Radio([BUNDLED, UPLOAD], value=BUNDLED, label="clips")
                self.limit = gr.Slider(1, n_samples, value=min(max(DEFAULT_LIMIT, len(labels)), n_samples), step=1,
                                       label="how many clips",
                                       info=f"N of the {n_samples} bundled clips, one label after another: the "
                                            f"first {len(labels)} cover every label ({', '.join(labels)})",
                                       elem_id="batch-limit")
                self.manifest = gr.File(label="manifest CSV (name,path,label,prompt_type,reference)",
                                        file_types=[".csv"], type="filepath", visible=False)
                self.clips = gr.File(label="clips named in the CSV", file_count="multiple",
                                     type="filepath", visible=False)
                with gr.Row():
                    self.engine = gr.Radio(list(ENGINES), value="local", label="engine",
                                           info="local: this server's models, one clip at a time; "
                                                "ray: a local Ray with N edge workers (docs/scale.md), "
                                                f"which costs ~{RAY_START_S} s of start-up on this machine",
                                           elem_id="batch-engine", scale=2)
                    self.workers = gr.Number(2, label="Ray workers", precision=0, minimum=1,
                                             maximum=MAX_WORKERS, elem_id="batch-workers", scale=1,
                                             visible=False)
                with gr.Row():
                    self.run_btn = gr.Button("▶ Run batch", variant="primary", elem_id="batch-run", scale=2)
                    self.stop_btn = gr.Button("■ Stop", variant="stop", scale=1)
            with gr.Column(scale=1, min_width=300):
                self.cfg_a = gr.Code(default_json, language="json", label="config A", lines=8,
                                     max_lines=14, elem_id="batch-config-a")
                self.a_from_live = gr.Button("A ← Live tab knobs", size="sm")
            with gr.Column(scale=1, min_width=300):
                self.use_b = gr.Checkbox(value=False, label="also run config B (A/B batch)")
                self.cfg_b = gr.Code(default_json, language="json", label="config B", lines=8,
                                     max_lines=14, elem_id="batch-config-b")
                self.b_from_live = gr.Button("B ← Live tab knobs", size="sm")
        with gr.Row(equal_height=True):
            self.status = gr.HTML(status_html("idle", "Pick clips and configurations, press Run batch."),
                                  elem_id="batch-status", js_on_load=None)
            self.dl_json = gr.DownloadButton("results JSON", visible=False, size="sm", scale=0, min_width=130)
            self.dl_csv = gr.DownloadButton("results CSV", visible=False, size="sm", scale=0, min_width=130)
        with gr.Row(equal_height=False):
            with gr.Column(scale=1):
                self.aggregate = gr.HTML(aggregate_html(aggregate_placeholder()), elem_id="batch-aggregate",
                                         js_on_load=None)
            with gr.Column(scale=1):
                self.checklist = gr.HTML(checklist_html(None), elem_id="batch-checklist", js_on_load=None)
        # the page's width: half of a 1280 px page hid four of its columns behind a scroll (issue 50)
        self.labels = gr.HTML("", elem_id="batch-labels", js_on_load=None)
        self.table = gr.Dataframe(results_table(None), label="per clip (full texts and traces in the JSON)",
                                  interactive=False, elem_id="batch-table", max_height=600, max_chars=28)
        gr.Markdown(columns_help(), elem_classes="ss-note", elem_id="batch-columns-help")
        self.plot = gr.Plot(batch_distributions(None), show_label=False)
        self._wire()

    def _wire(self):
        self.engine.change(lambda e: gr.update(visible=e == "ray"), self.engine, self.workers,
                           queue=False, api_visibility="private")
        self.source.change(lambda s: (gr.update(visible=s == UPLOAD),) * 2, self.source,
                           [self.manifest, self.clips], queue=False, api_visibility="private")
        knobs = self.live.panel
        for btn, target in ((self.a_from_live, self.cfg_a), (self.b_from_live, self.cfg_b)):
            btn.click(self.live.knobs_to_json, knobs.inputs, target, queue=False, api_visibility="private")
        self.b_from_live.click(lambda: True, None, self.use_b, queue=False, api_visibility="private")
        outs = [self.status, self.aggregate, self.checklist, self.labels, self.plot, self.table, self.dl_json, self.dl_csv]
        self.run_btn.click(waiting_or_blank, None, self.status, queue=False,
                           api_visibility="private").then(
            gpu(self.run), [self.source, self.limit, self.manifest, self.clips, self.cfg_a,
                                      self.use_b, self.cfg_b, self.live.backend, self.engine,
                                      self.workers], outs,
                           api_visibility="private", api_name="batch_run", concurrency_id="decode", concurrency_limit=limits.ADMIT,
                           trigger_mode="once", show_progress_on=[self.status])
        self.stop_btn.click(common.stopper("clip"), None, None, queue=False, api_visibility="private")

    def run(self, request: gr.Request, source, limit, manifest, clips, cfg_a, use_b, cfg_b, backend_name,
            engine="local", workers=2, progress=gr.Progress()):
        sk = gr.skip()
        try:
            sides = common.side_configs((("A", cfg_a), ("B", cfg_b))[: 1 + bool(use_b)])
            configs = {name: cap_config(c) for name, c in sides.items()}
            items = (clips_from_uploads(manifest, clips) if source == UPLOAD    # bundled: the first N span the labels
                     else spread_labels(read_manifest(common.MANIFEST)))
            items = items[: int(limit or len(items))]
            total = len(items) * len(configs)
            with common.running(common.session_of(request)) as cancel:
                if engine == "ray":
                    result, out = _run_ray(items, configs, backend_name, workers, cancel, progress, total)
                else:
                    result, out = _run_local(items, configs, backend_name, cancel, progress, total)
                if cancel.is_set():
                    raise UserError(f"batch stopped after {len(result.rows)} of {total} runs")
            df = results_table(result.rows)
            paths = result.write(out)
            failed = result.failed
            where = f" on Ray ({int(workers)} workers)" if engine == "ray" else ""
            detail = f"{len(result.rows)} runs{where} · {failed} failed" + (
                " (see the error column)" if failed else "")
            ctx = [("backend", backend_name or "demo"), ("engine", f"ray × {int(workers)}" if engine == "ray" else "local")]
            ctx += [("fault", f"{name} {f}" if len(configs) > 1 else f) for name, c in configs.items() for f in c.faults]
            return [status_html("err" if failed else "ok", "Batch done", detail, ctx),
                    aggregate_html(aggregate_frame(result)),
                    checklists_html(result), label_matrix_html(result.by_label),
                    batch_distributions(numeric_frame(result.rows)), df,
                    gr.update(value=str(paths["json"]), visible=True),
                    gr.update(value=str(paths["csv"]), visible=True)]
        except Exception as e:  # noqa: BLE001 - keep the page usable
            msg = common.failure(e, toast=True)
            return [status_html("err", "Batch not run", msg), sk, sk, sk, sk, sk, sk, sk]


def waiting_or_blank(request: gr.Request):
    """"waiting: N runs ahead" while other runs hold the slots, else blank (the progress bar goes there)."""
    if limits.runs_ahead(getattr(request, "session_hash", None))[0]:
        return limits.waiting_status(request)
    return status_html("run", "")


def _run_local(items, configs, backend_name, cancel, progress, total):
    """This server's backend, one clip at a time (evaluation.batch.iter_batch)."""
    backend = common.get_backend(backend_name)
    progress((0, total), desc="decoding", unit="runs")
    result, failed = None, 0
    rows = iter_batch(backend, items, configs, cancel=cancel)
    for ev in limits.take_turns(rows, cancel=cancel):   # one decode slot per clip, in turn
        if ev["type"] == "done":
            result = ev["result"]
            break
        row = ev["row"]
        failed += not row["ok"]
        progress((ev["done"], total), unit="runs", desc=f"{row['name']} ({row['config']}) · {failed} failed")
    return result, common.export_dir("batch")


def _run_ray(items, configs, backend_name, workers, cancel, progress, total):
    """The CLI's `batch --engine ray`: a local Ray with N edge actors for this batch, rows journalled."""
    workers = int(workers or 1)
    if not 1 <= workers <= MAX_WORKERS:
        raise UserError(f"Ray workers must be between 1 and {MAX_WORKERS}, got {workers}")
    out = common.export_dir("batch")
    progress((0, total), desc=f"starting {workers} Ray workers (~{RAY_START_S} s)", unit="runs")

    def on_row(ev):
        if ev["type"] == "progress":
            row = ev["row"]
            progress((ev["done"], total), unit="runs",
                     desc=f"{row['name']} ({row['config']}) · {ev['failed']} failed")

    spec = dict.fromkeys(SPEC_KEYS) | {"backend": backend_name or "demo"}
    # one local Ray per server process: a second one would share (and shut down) the first's
    if not _RAY_LOCK.acquire(blocking=False):
        raise UserError("a Ray batch is already running on this server: wait for it, or use the local engine")
    try:
        result, _ = run_batch_dir(spec, items, configs, out, engine="ray", workers=workers,
                                  on_row=on_row, cancel=cancel)
    finally:
        _RAY_LOCK.release()
    return result, out

