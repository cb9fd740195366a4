"""DIR/results.jsonl: one line per finished batch row, appended and flushed as it finishes, so a
killed batch keeps its rows and `--resume` runs only the missing ones. A cut-short line or a row
that failed with `retry: true` is dropped and runs again (docs/scale.md)."""
from __future__ import annotations

import json
import os
from pathlib import Path

from specdec_core.errors import UserError

NAME = "results.jsonl"


def row_key(row: dict) -> tuple[str, str]:
    return (str(row.get("name")), str(row.get("config")))


class Journal:
    def __init__(self, out_dir, resume: bool = False):
        self.dir = Path(out_dir)
        self.path = self.dir / NAME
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"cannot create output folder {self.dir}: {e.strerror}") from None
        self.rows: dict[tuple[str, str], dict] = read_rows(self.path) if resume else {}
        kept = "".join(_line(row) for row in self.rows.values())   # resume: the kept rows
        if not (resume and _read(self.path) == kept):                 # (a complete file: untouched)
            tmp = self.path.with_suffix(".jsonl.tmp")
            tmp.write_text(kept, encoding="utf-8")
            os.replace(tmp, self.path)
        self._f = open(self.path, "a", encoding="utf-8")

    def append(self, row: dict) -> None:
        """Write one finished row and push it to the disk before the next row is reported."""
        self._f.write(_line(row))
        self._f.flush()
        os.fsync(self._f.fileno())
        self.rows[row_key(row)] = row

    def close(self) -> None:
        self._f.close()


def read_rows(path) -> dict[tuple[str, str], dict]:
    """The finished rows of a results.jsonl (missing file: none), last line per key wins; lines
    cut short or not rows are skipped, as are rows marked `retry`."""
    rows: dict[tuple[str, str], dict] = {}
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return rows
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror}") from None
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if not isinstance(row, dict) or "name" not in row or "config" not in row or "ok" not in row:
            continue
        if row.get("retry"):
            rows.pop(row_key(row), None)
            continue
        rows[row_key(row)] = row
    return rows


def _read(path) -> str | None:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _line(row: dict) -> str:
    from specdec_core.decoding.trace import _finite

    return json.dumps(_finite(row), ensure_ascii=False, separators=(",", ":")) + "\n"
