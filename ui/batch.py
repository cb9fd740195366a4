"""The Batch tab: a manifest x one or two configurations, progress, per-clip table, aggregate
rows, the source notes' checklist per configuration, distribution plots, JSON/CSV export."""
from __future__ import annotations

import traceback

import gradio as gr
import pandas as pd

from components.batch_view import checklist_html, results_table
from components.plots import batch_distributions
from specdec_core.evaluation.batch import clips_from_uploads, iter_batch, read_manifest
from specdec_core.decoding.config import DecodeConfig
from specdec_core.errors import ConfigError, UserError

from . import common
from .views import status_html
from .gpu import gpu

BUNDLED, UPLOAD = "bundled samples", "upload CSV + clips"
DEFAULT_LIMIT = 6


class _Flag:
    """Stands in for a decoder in the session registry, so the Stop button ends the batch."""

    def __init__(self):
        self.cancelled = False

    def cancel(self):
        self.cancelled = True


AGGREGATE_ROWS = [  # (row title, where in the summary, key, digits)
    ("clips", None, "n", 0), ("ok", None, "ok", 0), ("failed", None, "failed", 0),
    ("acceptance rate (mean)", "mean", "acceptance_rate", 3),
    ("accepted length (median)", "median", "mean_accepted_length", 2),
    ("cloud call rate (mean)", "mean", "cloud_call_rate", 3),
    ("hanzi (median)", "median", "hanzi_count", 1),
    ("punctuation density (median)", "median", "punct_density", 3),
    ("repeat rate (median)", "median", "repeat_rate", 3),
    ("tokens / s (mean)", "mean", "tokens_per_s", 1),
    ("chrF vs reference (mean)", None, "chrf_mean", 1),
    ("emotion accuracy", None, "emotion_accuracy", 3),
    ("weighted F1 (MER2024)", None, "weighted_f1", 3),
]


def aggregate_frame(result) -> pd.DataFrame:
    """Aggregate rows: one row per summary figure, one column per configuration."""
    cols = {}
    for name, s in result.summary.items():
        vals = []
        for _title, scope, key, digits in AGGREGATE_ROWS:
            v = (s.get(scope) or {}).get(key) if scope else s.get(key)
            vals.append(round(v, digits) if isinstance(v, float) else v)
        per_label = s.get("per_label_accuracy") or {}
        vals.append(", ".join(f"{k} {v:.0%}" for k, v in per_label.items()) or "—")
        vals.append(", ".join(f"{k} {v}" for k, v in (s.get("ended_by") or {}).items()) or "—")
        cols[f"config {name}"] = [("—" if v is None else v) for v in vals]
    titles = [t for t, *_ in AGGREGATE_ROWS] + ["per-label accuracy", "ended by"]
    return pd.DataFrame({"": titles, **{k: [str(v) for v in vs] for k, vs in cols.items()}})


def checklists_html(result) -> str:
    parts = []
    for name, items in result.checklist.items():
        title = f"Checklist — config {name}" if len(result.checklist) > 1 else "Checklist"
        parts.append(f'<div class="ss-batch-check"><h4>{title}</h4>{checklist_html(items)}</div>')
    return '<div class="ss-batch-checks">' + "".join(parts) + "</div>"


class BatchTab:
    def __init__(self, live):
        self.live = live
        n_samples = max(1, len(common.sample_names()))
        default_json = DecodeConfig().to_json(indent=1)
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=300):
                self.source = gr.Radio([BUNDLED, UPLOAD], value=BUNDLED, label="clips")
                self.limit = gr.Slider(1, n_samples, value=min(DEFAULT_LIMIT, n_samples), step=1,
                                       label="how many clips", info="the first N rows of the manifest",
                                       elem_id="batch-limit")
                self.manifest = gr.File(label="manifest CSV (name,path,label,prompt_type,reference)",
                                        file_types=[".csv"], type="filepath", visible=False)
                self.clips = gr.File(label="clips named in the CSV", file_count="multiple",
                                     type="filepath", visible=False)
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
            with gr.Column(scale=2):
                self.aggregate = gr.Dataframe(label="aggregate over the clips", interactive=False,
                                              elem_id="batch-aggregate", wrap=True, max_height=640)
            with gr.Column(scale=3):
                self.checklist = gr.HTML(checklist_html(None), elem_id="batch-checklist", js_on_load=None)
        self.table = gr.Dataframe(results_table(None), label="per clip (full texts and traces in the JSON)",
                                  interactive=False, elem_id="batch-table", max_height=600, max_chars=24)
        self.plot = gr.Plot(batch_distributions(None), show_label=False)
        self._wire()

    def _wire(self):
        self.source.change(lambda s: (gr.update(visible=s == UPLOAD),) * 2, self.source,
                           [self.manifest, self.clips], queue=False, api_visibility="private")
        knobs = self.live.panel
        for btn, target in ((self.a_from_live, self.cfg_a), (self.b_from_live, self.cfg_b)):
            btn.click(self.live.knobs_to_json, knobs.inputs, target, queue=False, api_visibility="private")
        self.b_from_live.click(lambda: True, None, self.use_b, queue=False, api_visibility="private")
        outs = [self.status, self.aggregate, self.checklist, self.plot, self.table, self.dl_json, self.dl_csv]
        self.run_btn.click(gpu(self.run), [self.source, self.limit, self.manifest, self.clips, self.cfg_a,
                                      self.use_b, self.cfg_b, self.live.backend], outs,
                           api_visibility="private", api_name="batch_run", concurrency_id="decode", concurrency_limit=2,
                           trigger_mode="once", show_progress_on=[self.status, self.table])
        self.stop_btn.click(_stop, None, None, queue=False, api_visibility="private")

    def run(self, request: gr.Request, source, limit, manifest, clips, cfg_a, use_b, cfg_b, backend_name,
            progress=gr.Progress()):
        sk = gr.skip()
        flag = _Flag()
        session = common.session_of(request)
        try:
            configs = {}
            for name, text in (("A", cfg_a), ("B", cfg_b if use_b else None)):
                if text is None:
                    continue
                try:
                    configs[name] = DecodeConfig.from_json(text or "{}")
                except ConfigError as e:
                    raise ConfigError(f"config {name}: {e}") from None
            if source == UPLOAD:
                items = clips_from_uploads(manifest, clips)
            else:
                items = read_manifest(common.MANIFEST)
            items = items[: int(limit or len(items))]
            backend = common.get_backend(backend_name)
            common.register(session, flag)
            total = len(items) * len(configs)
            progress((0, total), desc="decoding", unit="runs")
            result = None
            for ev in iter_batch(backend, items, configs):
                if ev["type"] == "done":
                    result = ev["result"]
                    break
                row = ev["row"]
                progress((ev["done"], total), desc=f"{row['name']} ({row['config']})", unit="runs")
                if flag.cancelled:
                    raise UserError(f"batch stopped after {ev['done']} of {total} runs")
            df = results_table(result.rows)
            out = common.export_dir("batch")
            paths = result.write(out)
            failed = result.failed
            detail = f"{len(result.rows)} runs · {failed} failed" + (
                " (see the error column)" if failed else "")
            return [status_html("err" if failed else "ok", "Batch done", detail), aggregate_frame(result),
                    checklists_html(result), batch_distributions(df), df,
                    gr.update(value=str(paths["json"]), visible=True),
                    gr.update(value=str(paths["csv"]), visible=True)]
        except Exception as e:  # noqa: BLE001 - keep the page usable
            if not isinstance(e, UserError):
                traceback.print_exc()
            msg = common.user_message(e)
            gr.Warning(msg)
            return [status_html("err", "Batch not run", msg), sk, sk, sk, sk, sk, sk]
        finally:
            common.unregister(session, flag)


def _stop(request: gr.Request):
    if common.cancel_session(common.session_of(request)):
        gr.Info("stopping after the current clip")
