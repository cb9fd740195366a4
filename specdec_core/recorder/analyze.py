"""From a recording to its judged result, one direction (docs/recorder.md, "Pipeline"): normalize
-> evidence (built once) -> every registered check -> report (folded once per clip or row, then
`report.finish`, the one writer of the result's findings and its trace's diagnostics)."""
from __future__ import annotations

from specdec_core.recorder import normalize, report
from specdec_core.recorder.checks import registry
from specdec_core.recorder.evidence import Evidence
from specdec_core.recorder.normalize import batch_rows
from specdec_core.recorder.normalize.validate import check_fields, check_recording
from specdec_core.result import ClipResult


def analyze(rec: dict, tokenizer, info=None, dependence=None):
    """recording -> (Trace, findings). The trace's diagnostics are the findings. `dependence`:
    decoding/dependence.py's result for the output, when the backend gives one."""
    r = judge(rec, tokenizer, info, dependence)
    return r.trace, r.findings


def judge(rec: dict, tokenizer, info=None, dependence=None, **kw) -> ClipResult:
    """recording -> its judged result (specdec_core/result.py; `kw`: its other fields: shape,
    audio, ...): the recorded trace, the findings, the clip's Evidence for the pooled checks."""
    return report.finish(checked(rec, tokenizer, info, dependence, **kw))


def checked(rec: dict, tokenizer, info=None, dependence=None, **kw) -> ClipResult:
    """`judge` before the report's last step: the findings folded per clip or row; the caller
    adds what it knows (the output, a reference, the decoder's own trace), then `report.finish`."""
    check_recording(rec)                  # caps and consistency first (issue 36)
    check_fields(rec)                     # then each field's shape (issue 37)
    ctx = normalize.Context(tokenizer)
    if not batch_rows.batched(rec):
        e = _evidence(rec, ctx, info, dependence)
        return ClipResult(trace=e.trace, findings=report.fold(registry.run(e, "clip"), e),
                          recording=rec, evidence=e, **kw)
    rows, unread = batch_rows.split(rec, ctx)   # batch > 1: every row on its own (normalize/)
    if not rows:                          # the layout could not be read: the report says so
        e = _evidence(_unbatched(rec), ctx, info, None)
        return ClipResult(trace=e.trace, recording=rec, evidence=e, batch=unread, **kw)
    found, e_clip, B = [], None, rows[0][2]["batch_size"]
    for b, clip, r in rows:
        e = _evidence(r, ctx, info, dependence if clip else None)
        f = report.fold(registry.run(e, "clip" if clip else "row"), e)
        # an inferred output ends where the recording does: where it ends is not judged
        found += [batch_rows.name_row(x, b, B, clip) for x in f
                  if clip or x["code"] != "unverified_end"]
        e_clip = e if clip else e_clip
    batch = {"rows": len(rows), "batch": B, "row": next(b for b, c, _ in rows if c)}
    return ClipResult(trace=e_clip.trace, findings=found, recording=rec, evidence=e_clip,
                      batch=batch, **kw)


def evidence_of(rec: dict, tokenizer=None, info=None, dependence=None) -> Evidence:
    """The clip's Evidence of a recording: its row of a batch, normalized (no check run). A
    result carries its own (ClipResult.evidence): this builds one for a bare recording."""
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
