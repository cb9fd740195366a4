"""The Live tab's "pair" panel: the pair check's report, folded when all is well."""
from __future__ import annotations

from .findings import SEVERITY, findings_html
from .formatting import esc
from specdec_core.pairs.checks import passed_words


def pair_panel_html(report: dict | None, error: str | None = None) -> str:
    """`report`: the pair check's dict; `error`: one line when the check could not run."""
    if error:
        return (f'<details class="ss-pair" data-state="error" open><summary><b>pair</b> '
                f'<span class="ss-icon-error">{SEVERITY["error"][0]}</span> cannot check: {esc(error)}'
                '</summary></details>')
    if not report:
        return ('<details class="ss-pair" data-state="none"><summary><b>pair</b> not checked yet: '
                "it is checked when a backend loads</summary></details>")
    checks = report.get("checks") or []
    counts = {s: sum(f.get("severity") == s for f in checks) for s in ("error", "warning", "info")}
    state = "error" if counts["error"] else "warning" if counts["warning"] else "ok"
    parts = [f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items() if n]
    verdict = "usable" if report.get("usable", not counts["error"]) else "NOT usable"
    summary = (f'<b>pair</b> <span class="ss-icon-{state}">{SEVERITY[state][0]}</span> {verdict} · '
               + esc(", ".join(parts) or f"all {len(report.get('passed') or [])} checks passed"))
    v = report.get("versions") or {}
    facts = (f'<div class="ss-rf-ev">edge {esc(report.get("edge"))}<br>cloud {esc(report.get("cloud"))}'
             f'<br>passed: {esc(passed_words(report.get("passed")) or "—")}'
             f'<br>python {esc(v.get("python"))} · torch {esc(v.get("torch"))} · transformers '
             f'{esc(v.get("transformers"))} · gradio {esc(v.get("gradio"))} · {esc(report.get("device"))}</div>')
    body = findings_html(checks) if checks else ""
    opened = " open" if state != "ok" else ""
    return (f'<details class="ss-pair" data-state="{state}"{opened}><summary>{summary}</summary>'
            f"{body}{facts}</details>")
