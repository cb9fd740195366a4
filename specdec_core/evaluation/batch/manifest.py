"""Batch manifests: a CSV of clips (name,path,label,prompt_type,reference) -> `Clip`s.
Only `path` is required; a bad row is kept as a failing clip (`error` set) so one bad row never
stops a batch; a file that is not a CSV manifest raises UserError."""
from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass, field
from pathlib import Path

from specdec_core.audio.conditions import LABELS, PROMPT_TYPES
from specdec_core.errors import UserError

MANIFEST_COLUMNS = ("name", "path", "label", "prompt_type", "reference")
# Known optional columns: `speaker` groups clips for per-speaker prosody normalisation.
OPTIONAL_COLUMNS = ("speaker",)


@dataclass
class Clip:
    name: str
    path: str                           # absolute
    label: str | None = None            # one of LABELS, or None
    prompt_type: str | None = None      # None = the configuration's
    reference: str = ""
    speaker: str | None = None          # clips of one speaker are normalised together
    extra: dict = field(default_factory=dict)   # unknown manifest columns, kept and ignored
    error: str | None = None            # a manifest problem: the clip becomes a failing row


def read_manifest(path) -> list[Clip]:
    """Clips of a manifest CSV (header name,path,label,prompt_type,reference; paths relative to
    the manifest's folder)."""
    path = Path(path)
    base = path.resolve().parent

    def locate(raw: str) -> tuple[str, str | None]:
        p = Path(raw).expanduser()
        p = p if p.is_absolute() else base / p
        return str(p.resolve()), None if p.is_file() else f"audio file not found: {raw}"

    return _clips(path, locate)


def clips_from_uploads(csv_path, files) -> list[Clip]:
    """Clips for uploads: a manifest plus clip files matched by file name (the manifest's folder
    means nothing after an upload); without a manifest, one unlabeled clip per file."""
    uploads = []
    for f in files or []:
        if not isinstance(f, (str, os.PathLike)):
            raise UserError(f"uploaded clips must be file paths, got {type(f).__name__}")
        uploads.append(str(f))
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


def _clips(path: Path, locate) -> list[Clip]:
    clips = []
    for line, rec in _read_csv(path):
        raw = rec.get("path", "")
        name = rec.get("name") or (Path(raw).stem if raw else f"row {line}")
        label = rec.get("label", "").lower() or None
        ptype = rec.get("prompt_type", "").lower() or None
        extra = {k: v for k, v in rec.items() if k not in MANIFEST_COLUMNS + OPTIONAL_COLUMNS}
        abs_path, err = locate(raw) if raw else ("", f"row {line}: empty path")
        if label is not None and label not in LABELS:
            err = f"invalid label {label!r} (row {line}); choose from {', '.join(LABELS)} or leave it empty"
        elif ptype is not None and ptype not in PROMPT_TYPES:
            err = f"invalid prompt_type {ptype!r} (row {line}); choose from {', '.join(PROMPT_TYPES)} or leave it empty"
        clips.append(Clip(name=name, path=abs_path, label=label, prompt_type=ptype,
                          reference=rec.get("reference", ""), speaker=rec.get("speaker") or None,
                          extra=extra, error=err))
    return clips


def _read_csv(path: Path) -> list[tuple[int, dict]]:
    """(line number, {column: stripped value}) per non-empty row."""
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
    records = [(line, {h: (r[i].strip() if i < len(r) else "") for i, h in enumerate(header) if h})
               for line, r in rows[1:]]
    if not records:
        raise UserError(f"manifest {path.name} lists no clips")
    return records


def spread_labels(clips: list[Clip]) -> list[Clip]:
    """The clips reordered one label after another (each label's first clip, then each label's
    second, …; labels in first-seen order), so that the first N span every label as soon as N
    reaches the number of labels. The Batch tab's "how many clips" counts in this order."""
    by_label: dict = {}
    for c in clips:
        by_label.setdefault(c.label, []).append(c)
    out, depth = [], max((len(v) for v in by_label.values()), default=0)
    for i in range(depth):
        out += [v[i] for v in by_label.values() if i < len(v)]
    return out
