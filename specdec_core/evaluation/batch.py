"""Batch runs: a manifest of clips x one or two configurations -> per-clip rows with metrics and
reference scores, a summary and the source notes' checklist per configuration, JSON/CSV export.

One bad clip never stops a batch: manifest problems (bad label, missing file), user errors while
decoding and even unexpected exceptions all become a failing row with a one-line error.
"""
from __future__ import annotations

import csv
import io
import json
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean, median
from typing import Iterator

from specdec_core.evaluation.checklist import checklist
from specdec_core.audio.conditions import LABELS, PROMPT_TYPES
from specdec_core.decoding.config import DecodeConfig
from specdec_core.errors import UserError
from specdec_core.evaluation.scoring import per_label_accuracy, score_text, weighted_f1
from specdec_core.decoding.trace import _finite

MANIFEST_COLUMNS = ("name", "path", "label", "prompt_type", "reference")
# Metrics summarised per configuration (mean and median over ok clips).
KEY_METRICS = ("new_tokens", "hanzi_count", "acceptance_rate", "mean_accepted_length", "cloud_calls",
               "cloud_call_rate", "corrections", "punct_density", "repeat_rate", "adjacent_repeats",
               "cycles", "tokens_per_s", "wall_s")
ROW_COLUMNS = ("config", "name", "audio", "label", "prompt_type", "reference", "ok", "error", "text")
SCORE_COLUMNS = ("chrf", "emotion", "emotion_hit")


@dataclass
class Clip:
    name: str
    path: str                           # absolute
    label: str | None = None            # one of LABELS, or None
    prompt_type: str | None = None      # None = the configuration's
    reference: str = ""
    extra: dict = field(default_factory=dict)   # unknown manifest columns, kept and ignored
    error: str | None = None            # a manifest problem: the clip becomes a failing row


# --- manifests -------------------------------------------------------------------------------

def read_manifest(path) -> list[Clip]:
    """Clips of a manifest CSV (header name,path,label,prompt_type,reference; paths relative to
    the manifest's folder). Only `path` is required; a bad row is kept with `error` set. A file
    that is not a CSV manifest raises UserError."""
    path = Path(path)
    base = path.resolve().parent

    def locate(raw: str) -> tuple[str, str | None]:
        p = Path(raw).expanduser()
        p = p if p.is_absolute() else base / p
        return str(p.resolve()), None if p.is_file() else f"audio file not found: {raw}"

    return _clips(path, locate)


def clips_from_uploads(csv_path, files) -> list[Clip]:
    """Clips for the UI: an uploaded manifest plus uploaded clips matched by file name (the
    manifest's folder means nothing after an upload). Without a manifest, one unlabeled clip per
    uploaded file. A manifest row whose file was not uploaded becomes a failing row."""
    uploads = [_upload_path(f) for f in (files or [])]
    uploads = [p for p in uploads if p]
    if not csv_path:
        if not uploads:
            raise UserError("upload a manifest CSV or some audio clips")
        return [Clip(name=Path(p).stem, path=str(Path(p).resolve())) for p in uploads]
    by_name: dict[str, str] = {}
    for p in uploads:
        by_name.setdefault(Path(p).name, p)
    folded = {k.casefold(): v for k, v in reversed(list(by_name.items()))}

    def locate(raw: str) -> tuple[str, str | None]:
        fname = Path(raw.replace("\\", "/")).name
        hit = by_name.get(fname) or folded.get(fname.casefold())
        if hit is None:
            return raw, f"clip {fname} was not uploaded"
        return str(Path(hit).resolve()), None

    return _clips(Path(csv_path), locate)


def _upload_path(f) -> str | None:
    """Gradio hands uploads as paths, dicts or objects with .path/.name."""
    if f is None:
        return None
    if isinstance(f, (str, Path)):
        return str(f)
    if isinstance(f, dict):
        return f.get("path") or f.get("name")
    return getattr(f, "path", None) or getattr(f, "name", None)


def _clips(path: Path, locate) -> list[Clip]:
    records, header = _read_csv(path)
    clips = []
    for line, rec in records:
        raw = rec.get("path", "")
        name = rec.get("name") or (Path(raw).stem if raw else f"row {line}")
        label = rec.get("label", "").lower() or None
        ptype = rec.get("prompt_type", "").lower() or None
        extra = {k: rec[k] for k in header if k not in MANIFEST_COLUMNS}
        abs_path, err = locate(raw) if raw else ("", f"row {line}: empty path")
        if label is not None and label not in LABELS:
            err = f"invalid label {label!r} (row {line}); choose from {', '.join(LABELS)} or leave it empty"
        elif ptype is not None and ptype not in PROMPT_TYPES:
            err = f"invalid prompt_type {ptype!r} (row {line}); choose from {', '.join(PROMPT_TYPES)} or leave it empty"
        clips.append(Clip(name=name, path=abs_path, label=label, prompt_type=ptype,
                          reference=rec.get("reference", ""), extra=extra, error=err))
    return clips


def _read_csv(path: Path) -> tuple[list[tuple[int, dict]], list[str]]:
    """(line number, {column: stripped value}) per non-empty row, and the header."""
    if not path.is_file():
        raise UserError(f"manifest not found: {path}")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")  # Excel writes a BOM
    except UnicodeDecodeError:
        raise UserError(f"manifest {path.name} is not a UTF-8 CSV text file") from None
    if "\x00" in text:
        raise UserError(f"manifest {path.name} is not a CSV text file")
    try:
        rows = list(csv.reader(io.StringIO(text)))
    except csv.Error as e:
        raise UserError(f"manifest {path.name} is not a valid CSV: {e}") from None
    rows = [(i + 1, r) for i, r in enumerate(rows) if any(c.strip() for c in r)]
    if not rows:
        raise UserError(f"manifest {path.name} is empty")
    header = [h.strip().lower() for h in rows[0][1]]
    if "path" not in header:
        raise UserError(f"manifest {path.name} has no 'path' column in its header; "
                        f"expected {','.join(MANIFEST_COLUMNS)}")
    records = []
    for line, r in rows[1:]:
        records.append((line, {h: (r[i].strip() if i < len(r) else "") for i, h in enumerate(header) if h}))
    if not records:
        raise UserError(f"manifest {path.name} lists no clips")
    return records, [h for h in header if h]


# --- running ---------------------------------------------------------------------------------

def iter_batch(backend, clips: list[Clip], configs: dict[str, DecodeConfig],
               baseline: bool = False) -> Iterator[dict]:
    """Decode every clip with every configuration (clip-major, so A/B pairs arrive together).

    Yields {"type": "progress", "done", "total", "row"} after each clip x config, then
    {"type": "done", "result": BatchResult}. Stop iterating to cancel.
    """
    if isinstance(configs, DecodeConfig):
        configs = {"A": configs}
    if not configs:
        raise UserError("no configuration to run")
    clips = list(clips)
    if not clips:
        raise UserError("no clips to run")
    rows, total = [], len(clips) * len(configs)
    for clip in clips:
        for cname, cfg in configs.items():
            row = _run_one(backend, clip, cname, cfg, baseline)
            rows.append(row)
            yield {"type": "progress", "done": len(rows), "total": total, "row": row}
    yield {"type": "done", "result": BatchResult.from_rows(
        rows, {k: c.to_dict() for k, c in configs.items()}, backend=getattr(backend, "name", ""))}


def run_batch(backend, clips, configs, baseline: bool = False, on_row=None) -> "BatchResult":
    """iter_batch to the end; on_row(event) is called on every progress event."""
    for ev in iter_batch(backend, clips, configs, baseline):
        if ev["type"] == "done":
            return ev["result"]
        if on_row:
            on_row(ev)
    raise AssertionError("iter_batch ended without a result")  # pragma: no cover


def _run_one(backend, clip: Clip, cname: str, cfg: DecodeConfig, baseline: bool) -> dict:
    from specdec_core.api import run_clip

    row = {"config": cname, "name": clip.name, "audio": clip.path, "label": clip.label,
           "prompt_type": clip.prompt_type or cfg.prompt_type, "reference": clip.reference,
           "ok": False, "error": clip.error, "text": None, "metrics": {},
           "scores": dict.fromkeys(SCORE_COLUMNS), "trace": None}
    if clip.error:
        return row
    try:
        if clip.prompt_type and clip.prompt_type != cfg.prompt_type:
            cfg = cfg.replace(prompt_type=clip.prompt_type)
        res = run_clip(backend, clip.path, cfg, baseline=baseline, name=clip.name)
    except UserError as e:
        row["error"] = _one_line(str(e))
        return row
    except Exception as e:  # a bug, but the batch must complete: keep the evidence in the row
        row["error"] = _one_line(f"internal error: {type(e).__name__}: {e}")
        row["traceback"] = traceback.format_exc()
        return row
    if not res["ok"]:
        row["error"] = _one_line(res["error"])
        return row
    row.update(ok=True, text=res["text"], token_ids=res["token_ids"], metrics=res["metrics"],
               trace=res["trace"], scores=score_text(res["text"], clip.reference, clip.label))
    if "baseline" in res:
        row["baseline"] = res["baseline"]
    return row


def _one_line(msg: str) -> str:
    lines = [ln.strip() for ln in str(msg).splitlines() if ln.strip()]
    return lines[0] if lines else "unknown error"


# --- results ---------------------------------------------------------------------------------

@dataclass
class BatchResult:
    rows: list[dict]
    configs: dict[str, dict]                 # name -> DecodeConfig.to_dict()
    summary: dict[str, dict]                 # name -> summarize()
    checklist: dict[str, list[dict]]         # name -> checklist items
    backend: str = ""

    @classmethod
    def from_rows(cls, rows: list[dict], configs: dict[str, dict], backend: str = "") -> "BatchResult":
        summary, checks = {}, {}
        for name, cfg in configs.items():
            mine = [r for r in rows if r["config"] == name]
            summary[name] = summarize(mine)
            checks[name] = checklist(mine, min_new_tokens=cfg.get("min_new_tokens", 16),
                                     prompt_type=cfg.get("prompt_type", "detailed"))
        return cls(rows=rows, configs=configs, summary=summary, checklist=checks, backend=backend)

    @property
    def failed(self) -> int:
        return sum(not r["ok"] for r in self.rows)

    def to_dict(self) -> dict:
        return _finite({"backend": self.backend, "configs": self.configs, "summary": self.summary,
                        "checklist": self.checklist, "rows": self.rows})

    def to_json(self, **kw) -> str:
        kw.setdefault("indent", 1)
        return json.dumps(self.to_dict(), ensure_ascii=False, **kw)

    def to_frame(self):
        """One row per clip x config: the row fields, flat metric columns, then the scores.
        List-valued metrics are JSON strings, so the frame survives a CSV round trip."""
        import pandas as pd

        metric_cols: list[str] = []
        for r in self.rows:
            metric_cols += [k for k in r["metrics"] if k not in metric_cols]
        metric_cols = [c for c in metric_cols if c not in ROW_COLUMNS and c not in SCORE_COLUMNS]
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
         "mean": {}, "median": {}, "ended_by": {}}
    for key in KEY_METRICS:
        vals = [r["metrics"][key] for r in ok if _is_num(r["metrics"].get(key))]
        s["mean"][key] = round(mean(vals), 4) if vals else None
        s["median"][key] = round(median(vals), 4) if vals else None
    for r in ok:
        e = r["metrics"].get("ended_by") or "?"
        s["ended_by"][e] = s["ended_by"].get(e, 0) + 1
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


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def format_report(result: BatchResult) -> str:
    """The summary and checklist of every configuration as plain text (CLI output)."""
    out = []
    for name, s in result.summary.items():
        out.append(f"== config {name}: {s['n']} clips, {s['ok']} ok, {s['failed']} failed")
        for e in s["errors"]:
            out.append(f"   failed  {e['name']}: {e['error']}")
        for key in KEY_METRICS:
            mu, md = s["mean"][key], s["median"][key]
            if mu is not None:
                out.append(f"   {key:22s} mean {mu:10.3f}   median {md:10.3f}")
        if s["ended_by"]:
            out.append("   ended_by               " + ", ".join(f"{k} {v}" for k, v in s["ended_by"].items()))
        if s["chrf_mean"] is not None:
            out.append(f"   chrF mean              {s['chrf_mean']:.2f} ({s['n_reference']} clips with a reference)")
        if s["n_labeled"]:
            out.append(f"   emotion accuracy       {s['emotion_accuracy']:.3f} ({s['emotion_hits']}/{s['n_labeled']}, "
                       f"{s['no_emotion']} name no emotion)   weighted F1 {s['weighted_f1']:.3f}")
            out.append("   per label              " + ", ".join(f"{k} {v:.2f}" for k, v in s["per_label_accuracy"].items()))
        items = result.checklist[name]
        graded = [it for it in items if it["passed"] is not None]
        out.append(f"-- checklist {name}: {sum(bool(it['passed']) for it in graded)} of {len(graded)} checks passed")
        for it in items:
            mark = {True: "PASS", False: "FAIL", None: "info"}[it["passed"]]
            out.append(f"   [{mark}] {it['name']:28s} {it['value']:40s} target: {it['target']}")
    return "\n".join(out)


# --- CLI -------------------------------------------------------------------------------------

def cmd_batch(args) -> int:
    from specdec_core.cli import load_config, open_backend

    configs = {"A": load_config(args.config, args.preset, args.sets, args.faults)}
    if args.config_b:
        configs["B"] = load_config(args.config_b)
    clips = read_manifest(args.manifest)
    if args.limit is not None:
        if args.limit < 1:
            raise UserError(f"--limit must be >= 1, got {args.limit}")
        clips = clips[:args.limit]
    backend = open_backend(args, *configs.values())

    def progress(ev):
        r = ev["row"]
        if r["ok"]:
            m = r["metrics"]
            status = f"ok  {m.get('hanzi_count')} 汉字, acc {m.get('acceptance_rate')}: {r['text'][:40]}"
        else:
            status = f"error: {r['error']}"
        print(f"[{ev['done']}/{ev['total']}] {r['config']} {r['name']}: {status}", file=sys.stderr, flush=True)

    if getattr(args, "workers", 1) != 1:
        from specdec_core.evaluation.parallel import backend_spec, run_parallel

        result = run_parallel(backend_spec(args), clips, configs, args.workers, on_row=progress)
    else:
        result = run_batch(backend, clips, configs, on_row=progress)
    result.backend = args.backend
    paths = result.write(args.out)
    print(format_report(result))
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    return 0 if result.failed == 0 else 1
