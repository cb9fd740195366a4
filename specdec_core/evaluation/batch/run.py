"""Batch runs: clips x one or two configurations -> per-clip rows with metrics and reference
scores, a summary and the source notes' checklist per configuration, JSON/CSV export.
One bad clip never stops a batch: manifest problems, user errors and even unexpected exceptions
all become a failing row with a one-line error."""
from __future__ import annotations

import json
import threading
import traceback
from collections import Counter
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from statistics import mean, median
from typing import Iterator

from specdec_core.decoding.config import DecodeConfig
from specdec_core.decoding.trace import _finite
from specdec_core.errors import UserError, first_line
from specdec_core.evaluation.batch.checklist import checklist, metric_values
from specdec_core.evaluation.batch.manifest import Clip
from specdec_core.evaluation.batch.scoring import per_label_accuracy, score_text, weighted_f1

# Metrics summarised per configuration (mean and median over ok clips).
KEY_METRICS = ("new_tokens", "hanzi_count", "acceptance_rate", "mean_accepted_length", "cloud_calls",
               "cloud_call_rate", "corrections", "punct_density", "repeat_rate", "adjacent_repeats",
               "cycles", "tokens_per_s", "wall_s")
ROW_COLUMNS = ("config", "name", "audio", "label", "prompt_type", "reference", "ok", "error", "text")
SCORE_COLUMNS = ("chrf", "emotion", "emotion_hit")


def iter_batch(backend, clips: list[Clip], configs: dict[str, DecodeConfig],
               cancel: threading.Event | None = None) -> Iterator[dict]:
    """Decode every clip with every configuration (clip-major, so A/B pairs arrive together).
    Yields {"type": "progress", "done", "total", "row"} after each clip x config, then
    {"type": "done", "result": BatchResult}. `cancel` stops the running clip within one round and
    the batch before the next clip (the interrupted clip is dropped, `cancelled` is True)."""
    if not configs:
        raise UserError("no configuration to run")
    clips = list(clips)
    if not clips:
        raise UserError("no clips to run")
    rows, total = [], len(clips) * len(configs)
    norms = speaker_stats_for(backend, clips)

    def one(job):
        clip, (cname, cfg) = job
        return _run_one(backend, clip, cname, cfg, cancel, norms.get(clip.speaker))
    for _, row in run_rows(product(clips, configs.items()), one, cancel):
        rows.append(row)
        yield {"type": "progress", "done": len(rows), "total": total, "row": row}
    result = BatchResult.from_rows(rows, {k: c.to_dict() for k, c in configs.items()},
                                   backend=getattr(backend, "name", ""))
    result.cancelled = cancel is not None and cancel.is_set()
    yield {"type": "done", "result": result}


def run_rows(jobs, run_one, cancel: threading.Event | None = None) -> Iterator[tuple]:
    """The batch's one row loop, for both paths (iter_batch, and scale.run_batch_dir's local
    engine): (job, row) per job in order. Setting `cancel` ends it before the next job, and drops
    the row in flight (cut short: not a result)."""
    for job in jobs:
        if cancel is not None and cancel.is_set():
            return
        row = run_one(job)
        if cancel is not None and cancel.is_set():
            return
        yield job, row


def speaker_stats_for(backend, clips: list[Clip]) -> dict:
    """Per-speaker prosody statistics when the manifest names speakers (audio/speakers.py), for
    backends that read prosody from the audio. `backend`: a loaded backend or a backend name."""
    named = [(c.speaker, c.path) for c in clips if c.speaker and not c.error]
    from specdec_core.backends.registry import REGISTRY

    reads_prosody = (backend in REGISTRY and REGISTRY[backend].reads_audio if isinstance(backend, str)
                     else getattr(backend, "needs_audio", False))
    if not named or not reads_prosody:
        return {}
    from specdec_core.audio.prosody import speaker_stats

    return speaker_stats(named)


def failed_row(clip, cname: str, cfg: dict, error: str | None, retry: bool = False) -> dict:
    """A batch row that did not run (bad manifest row, worker died, no server up), with the
    fields of every row; `error` is cut to its first line. _run_one fills one in."""
    row = {"config": cname, "name": clip.name, "audio": clip.path, "label": clip.label,
           "prompt_type": clip.prompt_type or cfg.get("prompt_type"), "reference": clip.reference,
           "ok": False, "error": error and first_line(error), "text": None, "metrics": {},
           "scores": dict.fromkeys(SCORE_COLUMNS), "trace": None}
    if retry:
        row["retry"] = True
    return row


def _run_one(backend, clip: Clip, cname: str, cfg: DecodeConfig, cancel, speaker=None) -> dict:
    from specdec_core.api import run_clip

    row = failed_row(clip, cname, {"prompt_type": cfg.prompt_type}, clip.error)
    if clip.error:
        return row
    try:
        if clip.prompt_type and clip.prompt_type != cfg.prompt_type:
            cfg = cfg.replace(prompt_type=clip.prompt_type)
        res = run_clip(backend, clip.path, cfg, name=clip.name, cancel=cancel, speaker=speaker)
    except UserError as e:
        row["error"] = first_line(e)
        return row
    except Exception as e:  # a bug, but the batch must complete: keep the evidence in the row
        row["error"] = first_line(f"internal error: {type(e).__name__}: {e}")
        row["traceback"] = traceback.format_exc()
        return row
    if not res["ok"]:
        row["error"] = first_line(res["error"])
        return row
    row.update(ok=True, text=res["text"], token_ids=res["token_ids"], metrics=res["metrics"],
               trace=res["trace"], scores=score_text(res["text"], clip.reference, clip.label))
    return row


@dataclass
class BatchResult:
    rows: list[dict]
    configs: dict[str, dict]                 # name -> DecodeConfig.to_dict()
    summary: dict[str, dict]                 # name -> summarize()
    checklist: dict[str, list[dict]]         # name -> checklist items
    backend: str = ""
    cancelled: bool = False                  # stopped early: rows hold the clips finished
    by_label: dict | None = None             # {label: {columns, "configs": {config: columns}}} (watch.py)
    baseline: dict | None = None             # the comparison with a saved run (watch.compare)

    @classmethod
    def from_rows(cls, rows: list[dict], configs: dict[str, dict], backend: str = "") -> "BatchResult":
        summary, checks = {}, {}
        for name, cfg in configs.items():
            mine = [r for r in rows if r["config"] == name]
            summary[name] = summarize(mine)
            checks[name] = checklist(mine, min_new_tokens=cfg.get("min_new_tokens", 16),
                                     prompt_type=cfg.get("prompt_type", "detailed"))
        from specdec_core.evaluation.batch.watch import by_label

        return cls(rows=rows, configs=configs, summary=summary, checklist=checks, backend=backend,
                   by_label=by_label(rows))

    @property
    def failed(self) -> int:
        return sum(not r["ok"] for r in self.rows)

    def to_dict(self) -> dict:
        d = {"backend": self.backend, "configs": self.configs, "summary": self.summary,
             "checklist": self.checklist, "by_label": self.by_label, "cancelled": self.cancelled}
        if self.baseline is not None:
            d["baseline"] = self.baseline
        return _finite({**d, "rows": self.rows})

    def to_json(self, **kw) -> str:
        kw.setdefault("indent", 1)
        return json.dumps(self.to_dict(), ensure_ascii=False, **kw)

    def to_frame(self):
        """One row per clip x config: the row fields, flat metric columns, then the scores.
        List-valued metrics are JSON strings, so the frame survives a CSV round trip."""
        import pandas as pd

        metric_cols = [c for c in dict.fromkeys(k for r in self.rows for k in r["metrics"])
                       if c not in ROW_COLUMNS + SCORE_COLUMNS]
        records = []
        for r in self.rows:
            rec = {c: r.get(c) for c in ROW_COLUMNS}
            for c in metric_cols:
                v = r["metrics"].get(c)
                rec[c] = json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else v
            rec.update({c: (r.get("scores") or {}).get(c) for c in SCORE_COLUMNS})
            records.append(rec)
        return pd.DataFrame(records, columns=[*ROW_COLUMNS, *metric_cols, *SCORE_COLUMNS])

    def write(self, out_dir) -> dict[str, Path]:
        """results.json (everything, traces included), results.csv (to_frame) and
        summary.json (configs, summary, checklist)."""
        out = Path(out_dir)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"cannot create output folder {out}: {e.strerror}") from None
        paths = {"json": out / "results.json", "csv": out / "results.csv", "summary": out / "summary.json"}
        paths["json"].write_text(self.to_json(), encoding="utf-8")
        self.to_frame().to_csv(paths["csv"], index=False, encoding="utf-8")
        head = {k: v for k, v in self.to_dict().items() if k != "rows"}
        paths["summary"].write_text(json.dumps(head, ensure_ascii=False, indent=1), encoding="utf-8")
        return paths


def summarize(rows: list[dict]) -> dict:
    """Counts, failures, mean/median of KEY_METRICS over ok rows, and the reference scores:
    chrF mean (rows with a reference), emotion accuracy, per-label accuracy and weighted F1
    (ok rows with a label; a text naming no emotion counts as wrong)."""
    ok = [r for r in rows if r["ok"]]
    s = {"n": len(rows), "ok": len(ok), "failed": len(rows) - len(ok),
         "errors": [{"name": r["name"], "error": r["error"]} for r in rows if not r["ok"]],
         "mean": {}, "median": {}}
    for key in KEY_METRICS:
        vals = metric_values(ok, key)
        s["mean"][key] = round(mean(vals), 4) if vals else None
        s["median"][key] = round(median(vals), 4) if vals else None
    s["ended_by"] = dict(Counter(r["metrics"].get("ended_by") or "?" for r in ok))
    chrfs = [r["scores"]["chrf"] for r in ok if r["scores"].get("chrf") is not None]
    s["chrf_mean"] = round(mean(chrfs), 2) if chrfs else None
    s["n_reference"] = len(chrfs)
    labeled = [r for r in ok if r.get("label")]
    labels = [r["label"] for r in labeled]
    preds = [r["scores"].get("emotion") for r in labeled]
    s["n_labeled"] = len(labeled)
    s["emotion_hits"] = sum(p == y for y, p in zip(labels, preds))
    s["emotion_accuracy"] = round(s["emotion_hits"] / len(labeled), 4) if labeled else None
    s["no_emotion"] = sum(p is None for p in preds)
    s["per_label_accuracy"] = {k: round(v, 4) for k, v in per_label_accuracy(labels, preds).items()}
    f1 = weighted_f1(labels, preds)
    s["weighted_f1"] = round(f1, 4) if f1 is not None else None
    return s
