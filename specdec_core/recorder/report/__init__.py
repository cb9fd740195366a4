"""Report: the checks' findings folded once (docs/recorder.md, "Pipeline"): named causes, one cause
one code (`dedupe`), roots and their symptoms, a cut recording's nesting, text symptoms of an
exact loop, and the order; then `finish`, the one writer of a judged result's findings."""
from __future__ import annotations

from specdec_core.findings import REGISTRY, SEVERITIES, finding
from specdec_core.recorder.report import incomplete, named_causes
from specdec_core.recorder.report.model_or_decoder import judge_text
from specdec_core.recorder.report.roots import link


def dedupe(found: list) -> list:
    """One cause, one code (the codes' `dedupes` facts): argmax drafts also look like drafts
    sampled at a tiny temperature."""
    for mark, code, key in (d for c in REGISTRY.values() for d in c.dedupes):
        if any(mark in f.get("evidence", {}) for f in found):
            found = [f for f in found if not (f["code"] == code and key in f.get("evidence", {}))]
    return found


def order(found: list) -> list:
    """Errors first, then warnings, then info; roots before the symptoms they explain."""
    return sorted(found, key=lambda f: (SEVERITIES.index(f["severity"]), bool(f["explained_by"])))


def fold(found: list, e) -> list:
    """One clip's findings (its Evidence `e`) as the report shows them."""
    found = named_causes.name(found, e)     # penalty / first draft
    found = link(dedupe(found))
    # a text symptom of a loop shown exact (sampling with no sampling error) is the model's
    found = judge_text(incomplete.nest(found, incomplete.check_incomplete(e.t)), e.rec)
    return order(found)


def pooled(found: list, traces: list = ()) -> list:
    """Pooled findings folded (one cause, one code), then the edge's mishearing over the clips'
    traces together (analysis/audio_dependence.py: one clip rarely has enough drafts)."""
    from specdec_core.analysis.audio_dependence import pooled_edge_mishears

    return dedupe(found) + pooled_edge_mishears(list(traces))


STOPPED = ("cancelled", "time_limit")


def finish(r):
    """A judged result's findings as every reader gets them, written once to `r.findings` and
    its trace's diagnostics: the checks' (folded per clip or row: `fold`), a batch's rows line
    (or, rows unread, the one finding saying so), the numerics verdict of `record --reference`,
    the built-in decoder's own q check (decoding/checks.py, from its trace's warnings), a stopped
    run's end not judged. Returns r."""
    from specdec_core.decoding.checks import q_mismatch_findings

    found, tr = list(r.findings), r.trace
    if r.batch:
        found = order(found + [_layout(**r.batch) if "unread" in r.batch else _rows_line(**r.batch)])
    numerics = (r.recording or {}).get("numerics")
    found = _numerics(found, r.extra.get("reference"), numerics and numerics["dtype"])
    ended_by = getattr(tr, "ended_by", None) or (tr.get("ended_by") if isinstance(tr, dict) else None)
    if ended_by in STOPPED:        # stopped from outside: its end is not judged
        found = incomplete.end_not_judged(found, ended_by)
    own_q = q_mismatch_findings(getattr(tr, "warnings", None) or [])
    r.findings = found = link(found + own_q) if own_q else found
    if isinstance(tr, dict):
        tr["diagnostics"] = found
    elif tr is not None:
        tr.diagnostics = found
    return r


def compared(target, base: dict) -> dict:
    """A finished run compared afterwards with its cloud-only reference (driver/reference.compare):
    the numerics verdict joins its findings and trace diagnostics by finish's step. Returns base."""
    tr = getattr(target, "trace", target)
    tr["diagnostics"] = found = _numerics(tr.get("diagnostics") or [], base, (tr.get("info") or {}).get("dtype"))
    if tr is not target:
        target.findings = found
    return base


def _numerics(found: list, reference: dict | None, dtype) -> list:
    """A divergence from the reference by numerics is an info finding, never an error (issue 27)."""
    from specdec_core.analysis.divergence import numeric_finding

    fd = (reference or {}).get("first_divergence")
    if fd is None or fd["cause"] != "numerics":
        return found
    return sorted(found + [numeric_finding(fd, dtype)], key=lambda f: SEVERITIES.index(f["severity"]))


def _layout(batch: int, unread: str) -> dict:
    return finding("batch_layout", f"batch of {batch}: the rows could not be read; nothing was judged",
                   unread, "the recorder reads each row's padding from a 2D attention mask [batch, "
                   "cache + new] and finds the clip's row by its prompt",
                   "pass a 2D attention mask with the padding as zeros, and the clip's prompt "
                   "as one row's prompt", {"model": None, "forward": None, "batch": batch})


def _rows_line(rows: int, batch: int, row: int) -> dict:
    others = ", ".join(str(b) for b in range(batch) if b != row)
    every = rows == batch
    return finding("batch_rows", f"batch of {batch}: " + (
        f"every row judged; the clip is row {row}" if every else f"only the clip's row ({row}) judged"),
        f"rows {others}: " + ("judged against what their cloud chose in the contexts they were fed "
                              "(their output was not returned; their text and speed are not judged)"
                              if every else "not judged: a sampled row's output cannot be "
                              "inferred and the loop returned only the clip's"), "", "",
        {"model": None, "forward": None, "batch": batch, "row": row})
