"""From a recording to (trace, findings), one direction (docs/recorder.md, "Pipeline"):
normalize (normalize/: the canonical recording and notes) -> evidence (evidence/: built once)
-> every registered check (checks/registry.py) -> report (report/: folded once)."""
from __future__ import annotations

from specdec_core.findings import finding
from specdec_core.recorder import evidence, normalize, report
from specdec_core.recorder.checks import registry
from specdec_core.recorder.evidence import Evidence
from specdec_core.recorder.normalize import batch_rows
from specdec_core.recorder.normalize.validate import check_fields, check_recording


def analyze(rec: dict, tokenizer, info=None, dependence=None):
    """recording -> (Trace, findings). The trace's diagnostics are the findings. `dependence`:
    decoding/dependence.py's result for the output, when the backend gives one. The clip's
    Evidence is kept for the pooled checks (evidence_of)."""
    check_recording(rec)                  # caps and consistency first (issue 36)
    check_fields(rec)                     # then each field's shape (issue 37)
    if batch_rows.batched(rec):           # batch > 1: every row on its own (normalize/)
        trace, found, e = _analyze_rows(rec, normalize.Context(tokenizer), info, dependence)
    else:
        trace, found, e = _analyze_one(rec, normalize.Context(tokenizer), info, dependence, "clip")
    evidence.keep(rec, e)
    return trace, found


def evidence_of(rec: dict, tokenizer=None) -> Evidence:
    """The clip's Evidence of a recording `analyze` read (kept), else built from the recording."""
    return evidence.kept(rec) or canonical(rec, tokenizer)


def canonical(rec: dict, tokenizer=None, info=None, dependence=None) -> Evidence:
    """The clip's Evidence: its row of a batch, normalized (no check run)."""
    ctx = normalize.Context(tokenizer)
    if batch_rows.batched(rec):
        rows, _ = batch_rows.split(rec, ctx)
        rec = next((r for _, clip, r in rows if clip), _unbatched(rec))
    return _evidence(rec, ctx, info, dependence)


def _evidence(rec: dict, ctx, info, dependence) -> Evidence:
    canon, notes = normalize.run(rec, ctx)
    return Evidence(canon, ctx.tokenizer, info, dependence, notes, ctx)


def _unbatched(rec: dict) -> dict:
    return dict(rec, forwards=[f for f in rec["forwards"] if (f.get("batch") or 1) <= 1])


def _analyze_rows(rec: dict, ctx, info, dependence):
    rows, found = batch_rows.split(rec, ctx)
    if not rows:                          # the layout could not be read: say so, judge nothing
        e = _evidence(_unbatched(rec), ctx, info, None)
        e.trace.diagnostics = found
        return e.trace, found, e
    trace, e_clip, B = None, None, rows[0][2]["batch_size"]
    for b, clip, r in rows:
        t, f, e = _analyze_one(r, ctx, info, dependence if clip else None,
                               "clip" if clip else "row")
        # an inferred output ends where the recording does: where it ends is not judged
        found += [batch_rows.name_row(x, b, B, clip) for x in f
                  if clip or x["code"] != "unverified_end"]
        trace, e_clip = (t, e) if clip else (trace, e_clip)
    clip_row = next(b for b, c, _ in rows if c)
    others = ", ".join(str(b) for b in range(B) if b != clip_row)
    found.append(finding("batch_rows", f"batch of {B}: " + (
        f"every row judged; the clip is row {clip_row}" if len(rows) == B else
        f"only the clip's row ({clip_row}) judged"),
        f"rows {others}: " + ("judged against what their cloud chose in the contexts they were fed "
                              "(their output was not returned; their text and speed are not judged)"
                              if len(rows) == B else "not judged: a sampled row's output cannot be "
                              "inferred and the loop returned only the clip's"), "", "",
                         {"model": None, "forward": None, "batch": B, "row": clip_row}))
    found = report.order(found)
    trace.diagnostics = found
    return trace, found, e_clip


def _analyze_one(rec: dict, ctx, info, dependence, scope: str):
    e = _evidence(rec, ctx, info, dependence)
    found = report.fold(registry.run(e, scope), e)
    e.trace.diagnostics = found
    return e.trace, found, e
