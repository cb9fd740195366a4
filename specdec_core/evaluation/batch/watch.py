"""Over a dataset: the acceptance matrix by label, and the regression watch against a saved run.

Rows are batch rows (evaluation/batch/run.py). Acceptance is pooled over the clips (sums of
counts, not a mean of rates), with the serving engines' definitions (analysis/glossary.py)."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from statistics import median

from specdec_core.analysis.divergence import first_index as first_divergence
from specdec_core.errors import UserError
from specdec_core.evaluation.batch.journal import read_rows

NO_LABEL = "(none)"
# Changes smaller than these are not regressions (greedy runs repeat exactly; these only absorb
# rounding in the saved files).
ACCEPTANCE_TOL = 0.02        # draft acceptance rate, absolute
LENGTH_TOL = 0.05            # mean acceptance length, tokens per cloud call
# A slowdown counts only past SPEED_BAND on the median row, with the upper quartile below 1 and
# the machine's own slowdown (time per forward) taken out: docs/metrics.md, regression watch.
SPEED_BAND = 0.25
BAD_SEVERITIES = ("error", "warning")


def _counts(row: dict) -> dict:
    m, tr = row.get("metrics") or {}, row.get("trace") or {}
    verified = [r for r in tr.get("rounds") or [] if r.get("verified")]
    split = m.get("acceptance_by_dependence") or {}
    c = {"drafted": sum(r.get("drafted", 0) for r in verified),
         "accepted": sum(r.get("accepted", 0) for r in verified),
         "steps": len(verified), "tokens": m.get("new_tokens") or 0,
         "calls": m.get("cloud_calls") or 0}
    for cls in ("audio", "other"):
        s = split.get(cls) or {}
        c[cls + "_judged"], c[cls + "_accepted"] = s.get("judged", 0), s.get("accepted", 0)
    return c


def _ratio(a, b, digits=4):
    return round(a / b, digits) if b else None


def label_columns(rows: list[dict]) -> dict:
    tot: Counter = Counter()
    for r in rows:
        tot.update(_counts(r))
    judged = tot["audio_judged"] + tot["other_judged"]
    return {"clips": len(rows), "drafts": tot["drafted"],
            "acceptance_rate": _ratio(tot["accepted"], tot["drafted"]),
            "judged": judged,
            "judged_acceptance_rate": _ratio(tot["audio_accepted"] + tot["other_accepted"], judged),
            "audio_judged": tot["audio_judged"], "other_judged": tot["other_judged"],
            "audio_acceptance_rate": _ratio(tot["audio_accepted"], tot["audio_judged"]),
            "other_acceptance_rate": _ratio(tot["other_accepted"], tot["other_judged"]),
            "mean_accepted_length": round(1 + tot["accepted"] / tot["steps"], 4) if tot["steps"] else None,
            "cloud_calls_per_token": _ratio(tot["calls"], tot["tokens"])}


def by_label(rows: list[dict]) -> dict:
    """{label: {columns pooled over the label's ok rows, "configs": {config: columns}}}, labels
    in first-seen order: one row of the matrix per label (a batch of one configuration reads
    the same at both levels), the per-configuration split beside it."""
    out: dict = {}
    for r in rows:
        if r.get("ok"):
            out.setdefault(r.get("label") or NO_LABEL, {}).setdefault(r["config"], []).append(r)
    return {lab: {**label_columns([r for rs in cfgs.values() for r in rs]),
                  "configs": {c: label_columns(rs) for c, rs in cfgs.items()}}
            for lab, cfgs in out.items()}


def matrix_rows(table: dict) -> list[list]:
    """by_label as table rows: label, config, then the columns (the report and the Batch tab)."""
    return [[lab, cfg, *(cols.get(h) for h in MATRIX_HEADERS[2:])] for lab, row in table.items()
            for cfg, cols in (row.get("configs") or {}).items()]


MATRIX_HEADERS = ["label", "config", "clips", "acceptance_rate", "audio_acceptance_rate",
                  "other_acceptance_rate", "mean_accepted_length", "cloud_calls_per_token"]


def label_report(table: dict | None) -> str:
    if not table:
        return ""
    fmt = lambda v: "-" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))  # noqa: E731
    lines = ["-- acceptance by label: " + " | ".join(MATRIX_HEADERS)]
    lines += ["   " + " | ".join(fmt(v) for v in row) for row in matrix_rows(table)]
    return "\n".join(lines)


# ---- regression watch -------------------------------------------------------------------------
def load_rows(folder) -> list[dict]:
    """The rows of a saved batch folder (results.json; else results.jsonl, read as --resume
    reads it: lines cut short are skipped)."""
    d = Path(folder)
    if (d / "results.json").is_file():
        try:
            return json.loads((d / "results.json").read_text(encoding="utf-8"))["rows"]
        except (ValueError, KeyError) as e:
            raise UserError(f"--baseline {folder}: results.json is not a batch result ({e})") from None
    if (d / "results.jsonl").is_file():       # a killed or running batch: its finished rows
        return list(read_rows(d / "results.jsonl").values())
    raise UserError(f"--baseline {folder}: no results.json or results.jsonl there")


def _findings(row: dict) -> set:
    diags = (row.get("trace") or {}).get("diagnostics") or []
    from specdec_core.findings import from_json

    return {f["code"] for f in map(from_json, diags) if f["severity"] in BAD_SEVERITIES and not f["explained_by"]}


def _delta(a, b):
    return None if a is None or b is None else round(a - b, 4)


def compare_row(now: dict, base: dict) -> dict:
    m, mb = now.get("metrics") or {}, base.get("metrics") or {}
    ids, ids_b = now.get("token_ids") or [], base.get("token_ids") or []
    div = first_divergence(ids, ids_b) if now.get("ok") and base.get("ok") else None
    sp, sp_b = m.get("tokens_per_s"), mb.get("tokens_per_s")
    f, f_b = _forward_s(m), _forward_s(mb)
    return {"name": now["name"], "config": now["config"], "ok": now.get("ok"), "ok_before": base.get("ok"),
            "tokens_changed": div is not None, "first_divergence": div,
            "acceptance_delta": _delta(m.get("acceptance_rate"), mb.get("acceptance_rate")),
            "mean_accepted_length_delta": _delta(m.get("mean_accepted_length"), mb.get("mean_accepted_length")),
            "new_findings": sorted(_findings(now) - _findings(base)),
            "speed_ratio": _ratio(sp, sp_b, 3) if sp and sp_b else None,
            "forward_s_ratio": _ratio(f, f_b, 3) if f and f_b else None}


def _forward_s(m: dict) -> float | None:
    """Seconds per model forward of a row (edge and cloud together)."""
    ts = m.get("time_split") or {}
    n = (m.get("draft_forwards") or 0) + (m.get("target_forwards") or 0)
    busy = (ts.get("edge_s") or 0) + (ts.get("cloud_s") or 0)
    return busy / n if n and busy > 0 else None


def _row_regressions(c: dict) -> list[dict]:
    out = []

    def add(what, detail):
        out.append({"name": c["name"], "config": c["config"], "what": what, "detail": detail})

    if c["ok_before"] and not c["ok"]:
        add("failed", "the row failed; it ran in the baseline")
    if c["tokens_changed"]:
        add("token_ids", f"output changed from token {c['first_divergence']}")
    if c["acceptance_delta"] is not None and c["acceptance_delta"] < -ACCEPTANCE_TOL:
        add("acceptance_rate", f"draft acceptance rate {c['acceptance_delta']:+.3f}")
    if c["mean_accepted_length_delta"] is not None and c["mean_accepted_length_delta"] < -LENGTH_TOL:
        add("mean_accepted_length", f"mean acceptance length {c['mean_accepted_length_delta']:+.3f}")
    if c["new_findings"]:
        add("findings", "new: " + ", ".join(c["new_findings"]))
    return out


def speed_summary(rows: list[dict]) -> dict | None:
    """Median speed ratio (tokens/s now / baseline) over the compared rows with its noise range
    (quartiles, min-max), the machine's slowdown (median time-per-forward ratio) and the ratio
    with it taken out (`adjusted`). `slower`: a regression by the rule above SPEED_BAND."""
    r = sorted(c["speed_ratio"] for c in rows if c.get("speed_ratio"))
    if not r:
        return None
    q = lambda p: r[min(len(r) - 1, int(p * (len(r) - 1) + 0.5))]  # noqa: E731
    s = {"ratio": round(median(r), 3), "quartiles": [q(0.25), q(0.75)], "range": [r[0], r[-1]],
         "rows": len(r), "band": SPEED_BAND}
    adj = [c["speed_ratio"] * c["forward_s_ratio"] for c in rows
           if c.get("speed_ratio") and c.get("forward_s_ratio")]
    s["machine"] = round(median([c["forward_s_ratio"] for c in rows if c.get("forward_s_ratio")]), 3) if adj else None
    s["adjusted"] = round(median(adj), 3) if adj else None
    s["slower"] = (s["ratio"] < 1 - SPEED_BAND and s["quartiles"][1] < 1
                   and (s["adjusted"] is None or s["adjusted"] < 1 - SPEED_BAND))
    return s


def compare(rows: list[dict], base_rows: list[dict], folder: str = "") -> dict:
    """results.json["baseline"]: every row matched by (name, config) with its changes, the
    speed ratio, and `regressions` (what got worse; empty when nothing did)."""
    base = {(r.get("name"), r.get("config")): r for r in base_rows}
    matched, new = [], []
    for r in rows:
        b = base.get((r.get("name"), r.get("config")))
        (matched if b is not None else new).append(compare_row(r, b) if b is not None else r.get("name"))
    regs = [x for c in matched for x in _row_regressions(c)]
    speed = speed_summary([c for c in matched if c["ok"] and c["ok_before"]])
    if speed and speed["slower"]:
        regs.append({"name": None, "config": None, "what": "speed",
                     "detail": f"median speed ratio {speed['ratio']:.2f} (quartiles "
                               f"{speed['quartiles'][0]:.2f}-{speed['quartiles'][1]:.2f}; "
                               f"{speed['adjusted']} with the machine's slowdown taken out), beyond "
                               f"the {SPEED_BAND:.0%} noise band"})
    seen = {(r.get("name"), r.get("config")) for r in rows}
    return {"dir": str(folder), "rows": matched, "not_in_baseline": new,
            "missing_now": [r.get("name") for r in base_rows if (r.get("name"), r.get("config")) not in seen],
            "changed_rows": sum(c["tokens_changed"] for c in matched),
            "speed": speed, "regressions": regs}


def baseline_report(b: dict) -> str:
    s = b.get("speed")
    lines = [f"== baseline {b['dir']}: {len(b['rows'])} rows compared, {b['changed_rows']} with "
             f"changed tokens, {len(b['regressions'])} regression(s)"]
    if s:
        lines.append(f"   speed ratio (now/baseline) median {s['ratio']:.2f}, quartiles "
                     f"{s['quartiles'][0]:.2f}-{s['quartiles'][1]:.2f}, range {s['range'][0]:.2f}-"
                     f"{s['range'][1]:.2f} (noise band {s['band']:.0%}); time per forward "
                     f"{s['machine']}x, speed with that taken out {s['adjusted']}x")
    for r in b["regressions"]:
        where = f"{r['name']} [{r['config']}]" if r["name"] else "all rows"
        lines.append(f"   REGRESSION {where}: {r['what']}: {r['detail']}")
    return "\n".join(lines)
