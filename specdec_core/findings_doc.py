"""docs/findings.md's table, generated from the one registry of codes (specdec_core/findings.py)."""
from __future__ import annotations

from specdec_core.findings import REGISTRY, SEVERITIES


def markdown_table() -> str:
    """The registry as a Markdown table (docs/findings.md carries it; a test keeps them equal)."""
    rows = ["| code | severity | mechanism | triggered by | source |", "|---|---|---|---|---|"]
    for c in sorted(REGISTRY.values(), key=lambda c: (SEVERITIES.index(c.severity), c.code)):
        sev = " / ".join(c.severities)
        rows.append(f"| `{c.code}` | {sev} | {c.mechanism} | {c.trigger} | {c.source} |")
    return "\n".join(rows)


def write_doc(path: str = "docs/findings.md") -> None:
    """Regenerate the table in docs/findings.md (python -c "from specdec_core.findings_doc import
    write_doc; import specdec_core.recorder.analyze, specdec_core.audit.checks; write_doc()")."""
    from pathlib import Path
    head, rest = Path(path).read_text(encoding="utf-8").split("<!-- registry:start -->\n")
    tail = rest.split("\n<!-- registry:end -->")[1]
    Path(path).write_text(f"{head}<!-- registry:start -->\n{markdown_table()}\n<!-- registry:end -->{tail}",
                          encoding="utf-8")
