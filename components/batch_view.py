"""Batch view pieces: checklists, the per-clip table, the aggregate table, acceptance by label."""

from __future__ import annotations

import os

import pandas as pd

from specdec_core.analysis.glossary import hover, term
from specdec_core.evaluation.batch.checklist import checklist_head

from .formatting import ended_by_words, esc, fmt, is_number, stylesheet

BATCH_CSS = stylesheet("batch")

_STATE = {True: ("✔", "pass", "pass"), False: ("✖", "fail", "fail"), None: ("–", "info", "reported")}


def checklist_html(items: list[dict] | None) -> str:
    """Items: {"name", "passed": True | False | None (reported only), "value", "target"}."""
    if not items:
        return '<div class="ss-none">No checklist yet: run a batch first.</div>'
    lines = []
    for it in items:
        icon, cls, word = _STATE.get(it.get("passed"), _STATE[None])
        lines.append(
            f'<div class="ss-check ss-check-{cls}" data-passed="{word}">'
            f'<span class="ss-check-icon" aria-label="{word}">{icon}</span>'
            f'<span class="ss-check-name">{esc(it.get("name"))}</span>'
            f'<span class="ss-check-value">{esc(it.get("value"))}</span>'
            f'<span class="ss-check-target">{esc(it.get("target"))}</span></div>'
        )
    return f'<div class="ss-checklist"><div class="ss-check-summary">{esc(checklist_head(items))}</div>{"".join(lines)}</div>'


CHRF = "chrF (0–100)"     # the score's scale in its title: a reader cannot guess 0-1 or 0-100

# (column title, keys to look for: top level, then row["metrics"], then row["scores"]). The
# short columns a reader checks first come before the long text, so that the table fits the
# page without sideways scrolling (the full text is in the results JSON).
COLUMNS = [("name", ("name", "audio")), ("config", ("config_name", "config")), ("label", ("label",)),
           ("ok", ("ok",)), ("emotion hit", ("emotion_hit",)), (CHRF, ("chrf", "chrF")),
           ("prompt type", ("prompt_type",)), ("汉字", ("hanzi_count",)), ("acceptance", ("acceptance_rate",)),
           ("acc. len", ("mean_accepted_length",)), ("punct.", ("punct_density",)), ("tokens/s", ("tokens_per_s",)),
           ("error", ("error",)), ("text", ("text",))]
_OPTIONAL = {"config"}  # only shown when some row has it (A/B batches)


def columns_help() -> str:
    """One line naming each numeric column of the per-clip table, from the glossary."""
    parts = []
    for title, keys in COLUMNS:
        t = term(keys[0])
        if t.meaning and title not in ("name", "label", "ok", "error", "text", "config"):
            parts.append(f"**{title}**: {t.meaning}")
        elif title == "prompt type":
            parts.append("**prompt type**: the clip's prompt, which sets its 汉字 band (detailed 30–70, "
                         "concise 8–16)")
    return " · ".join(parts)


def _lookup(row: dict, keys: tuple[str, ...]):
    run_cfg = (row.get("trace") or {}).get("config") or {}     # e.g. the config's prompt type
    for scope in (row, row.get("metrics") or {}, row.get("scores") or {}, run_cfg):
        for key in keys:
            value = scope.get(key) if isinstance(scope, dict) else None
            if value is not None and not isinstance(value, (dict, list)):  # a config dict is not a name
                return value
    return None


def _cell(key: str, value, digits: int):
    """A table value written one way: shares as percentages, flags yes / no, floats with `digits`."""
    if is_number(value) and term(key).unit == "%":
        return fmt(key, value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:.{digits}f}" if is_number(value) and isinstance(value, float) else value


def results_table(rows: list[dict] | None) -> pd.DataFrame:
    """Readable per-clip table from batch result rows (flat or with nested metrics/scores)."""
    records = []
    for row in rows or []:
        rec = {}
        for title, keys in COLUMNS:
            value = _lookup(row, keys)
            if title == "name" and isinstance(value, str) and "name" not in row:
                value = os.path.basename(value)  # an audio path: the file name reads better
            rec[title] = _cell(keys[0], value, 1 if title in (CHRF, "tokens/s") else 2)
        records.append(rec)
    columns = [t for t, _ in COLUMNS if t not in _OPTIONAL or any(r.get(t) is not None for r in records)]
    return pd.DataFrame(records, columns=columns)


def _agg(scope: str, key: str, digits: int) -> tuple:
    """An aggregate row titled by the glossary: 'draft acceptance rate, mean (%)'."""
    t = term(key)
    unit = f", {t.unit}" if t.unit and t.unit != "%" and len(t.unit) <= 8 else ""   # short rows: the
    # table is narrow, and a long title pushes the configurations' columns out of view
    return (f"{t.label} ({scope}{unit})", scope, key, digits)


AGGREGATE_ROWS = [  # (row title, where in the summary, key, digits)
    ("clips", None, "n", 0), ("ok", None, "ok", 0), ("failed", None, "failed", 0),
    _agg("mean", "acceptance_rate", 3),
    _agg("median", "mean_accepted_length", 2),
    _agg("mean", "cloud_call_rate", 3),
    _agg("median", "hanzi_count", 1),
    _agg("median", "punct_density", 3),
    _agg("median", "repeat_rate", 3),
    _agg("mean", "tokens_per_s", 1),
    ("chrF vs reference (mean, 0–100)", None, "chrf_mean", 1),
    ("emotion accuracy", None, "emotion_accuracy", 3),
    ("weighted F1 (MER2024)", None, "weighted_f1", 3),
]


def aggregate_frame(result) -> pd.DataFrame:
    """One row per summary figure (and per reason the clips ended), one column per configuration."""
    cols = {}
    ends = list(dict.fromkeys(k for s in result.summary.values() for k in s.get("ended_by") or {}))
    for name, s in result.summary.items():
        vals = [_cell(key, (s.get(scope) or {}).get(key) if scope else s.get(key), digits)
                for _title, scope, key, digits in AGGREGATE_ROWS]
        per_label = s.get("per_label_accuracy") or {}
        vals.append(", ".join(f"{k} {fmt('emotion_accuracy', v)}" for k, v in per_label.items()) or "—")
        vals += [(s.get("ended_by") or {}).get(k, 0) for k in ends] or [None]
        cols[f"config {name}"] = [("—" if v is None else v) for v in vals]
    titles = ([t for t, *_ in AGGREGATE_ROWS] + ["per-label accuracy"]
              + ([f"ended by {ended_by_words(k)} (clips)" for k in ends] or ["ended by"]))
    return pd.DataFrame({"figure": titles, **{k: [str(v) for v in vs] for k, vs in cols.items()}})


def aggregate_placeholder() -> pd.DataFrame:
    """The aggregate table before a batch ran: its row titles, no numbers yet."""
    titles = [t for t, *_ in AGGREGATE_ROWS] + ["per-label accuracy", "ended by"]
    return pd.DataFrame({"figure": titles, "config A": ["—"] * len(titles)})


def aggregate_html(df: pd.DataFrame) -> str:
    """The aggregate frame as a table that fits 1280 px: titles wrap, every configuration stays in view."""
    cols = list(df.columns)
    head = "".join(f'<th class="ss-agg-{esc(c.split()[-1])}" data-config="{esc(c)}">{esc(c)}</th>' for c in cols[1:])
    body = "".join("<tr><th>" + esc(r[0]) + "</th>" + "".join(f"<td>{esc(v)}</td>" for v in r[1:]) + "</tr>"
                   for r in df.itertuples(index=False))
    return (f'<div class="ss-agg" id="batch-aggregate-table"><h4>Aggregate over the clips</h4><table>'
            f'<thead><tr><th>{esc(cols[0])}</th>{head}</tr></thead><tbody>{body}</tbody></table></div>')


def numeric_frame(rows: list[dict] | None) -> pd.DataFrame:
    """Raw numbers per clip (config + the metrics the batch histograms draw), for plots."""
    keys = ("mean_accepted_length", "punct_density", "hanzi_count", "tokens_per_s")
    recs = []
    for row in rows or []:
        rec = {"config": _lookup(row, ("config_name", "config"))}   # A and B: one colour each
        for k in keys:
            v = _lookup(row, (k,))
            rec[k] = v if is_number(v) else None
        recs.append(rec)
    df = pd.DataFrame(recs, columns=["config", *keys])
    if df["config"].isna().all():
        df = df.drop(columns=["config"])
    return df


def checklists_html(result) -> str:
    parts = []
    for name, items in result.checklist.items():
        title = f"Checklist — config {name}" if len(result.checklist) > 1 else "Checklist"
        parts.append(f'<div class="ss-batch-check"><h4>{title}</h4>{checklist_html(items)}</div>')
    return '<div class="ss-batch-checks">' + "".join(parts) + "</div>"


LABEL_COLUMNS = ("clips", "drafts", "acceptance_rate", "judged", "judged_acceptance_rate", "audio_acceptance_rate",
                 "other_acceptance_rate", "mean_accepted_length", "cloud_calls_per_token")
# (column, its denominator as the header says it)
LABEL_DENOMINATORS = {"acceptance_rate": "of drafts", "judged_acceptance_rate": "of judged",
                      "audio_acceptance_rate": "of its judged", "other_acceptance_rate": "of its judged"}
LABEL_NOTE = ("Denominators: the draft acceptance rate divides by every draft of a verified round (vLLM's); "
              "the three acceptances to its right divide by judged drafts only (the accepted ones and the one "
              "rejected draft per round; the drafts after it were never judged), so they read higher. The "
              "whole of the audio-dependent and other halves is the acceptance per judged draft, which lies "
              "between them. A config with a tree counts sibling nodes among its drafts.")


def _label_cell(c: str, cols: dict) -> str:
    v = fmt(c, cols.get(c))
    n = {"audio_acceptance_rate": "audio_judged", "other_acceptance_rate": "other_judged"}.get(c)
    if n and is_number(cols.get(n)) and cols.get(c) is not None:
        v += f" of {cols[n]}"
    share = ' class="ss-share"' if term(c).unit == "%" else ""
    return f"<td{share}>{esc(v)}</td>"


def label_matrix_html(by_label: dict | None) -> str:
    """results.json["by_label"]: a row per label and configuration, each acceptance with its denominator."""
    if not by_label:
        return '<div class="ss-none">No acceptance by label yet: run a batch first.</div>'
    head = "".join(f'<th title="{esc(hover(c))}">{esc(term(c).label)}'
                   + (f'<br><span class="ss-denom">{esc(LABEL_DENOMINATORS[c])}</span>' if c in LABEL_DENOMINATORS
                      else "") + "</th>" for c in LABEL_COLUMNS)
    rows = []
    for label, row in by_label.items():
        for cfg, cols in (row.get("configs") or {}).items():
            cells = "".join(_label_cell(c, cols) for c in LABEL_COLUMNS)
            rows.append(f'<tr class="ss-cfg-{esc(cfg)}" data-config="{esc(cfg)}"><th>{esc(label)}</th>'
                        f'<td class="ss-cfg-name">{esc(cfg)}</td>{cells}</tr>')
    return ('<div class="ss-batch-check ss-by-label" id="batch-by-label"><h4>Acceptance by label</h4>'
            f'<div class="ss-by-label-box"><table class="ss-label-matrix"><tr><th>label</th><th>config</th>{head}</tr>'
            + "".join(rows) + f'</table></div><div class="ss-note ss-by-label-note">{esc(LABEL_NOTE)}</div></div>')
