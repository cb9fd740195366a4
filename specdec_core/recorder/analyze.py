"""From a recording to (trace, findings): reconstruction plus every blind check."""
from __future__ import annotations

from dataclasses import dataclass

from specdec_core.analysis.acceptance import rank_findings
from specdec_core.analysis.audio_dependence import attach
from specdec_core.analysis.diagnostics import TASK_CHECKS, TRACE_CHECKS
from specdec_core.recorder import (checks, collapse, verify_cost, head_checks, incomplete, named_causes, normalize,
                                   not_judged, omni_checks, output_checks, penalty_check, sampling,
                                   speed, tree_sampling, tree_trace)
from specdec_core.findings import finding
from specdec_core.recorder.checks import _ev
from specdec_core.recorder.model_or_decoder import judge_text
from specdec_core.recorder.roots import link
from specdec_core.recorder.rounds import build_rounds
from specdec_core.recorder.tape import build_tapes
from specdec_core.recorder.validate import check_fields, check_recording
from specdec_core.recorder.normalize import batch_rows
from specdec_core.recorder.trace_build import Texts, build_trace

SEVERITY = {"error": 0, "warning": 1, "info": 2}


def check_structure(t, rounds, rec: dict, texts) -> list[dict]:
    out, k = [], rec.get("declared", {}).get("k")
    if k and rec.get("declared", {}).get("entropy_threshold") is None:   # a gate verifies
        # several confident blocks in one forward: its rounds are longer than k by design
        long = [r for r in rounds if r.verified and len(r.block) > k]
        runs = [r for r in rounds if r.verified and (r.end - r.block_start) > k + 1]
        sizes = sorted({len(r.block) for r in rounds if r.verified and r.block})
        if long and max(sizes) > k + 1:      # lengths vary past k+1: a schedule, not a slip
            out.append(finding(
                "draft_schedule", f"draft length varies from {sizes[0]} to {sizes[-1]} per round (declared k={k})",
                f"{len(long)} of {sum(r.verified for r in rounds)} rounds drafted more than k",
                "the decoder chooses the draft length itself (e.g. transformers' heuristic "
                "num_assistant_tokens schedule or a confidence threshold); k is not what it drafts",
                "nothing to fix if intended; declare the schedule's maximum as k to compare",
                _ev(long[0].cloud, long[0].block_start, long[0].block, round=long[0].n)))
        elif long or runs:
            r = (long or runs)[0]
            out.append(finding(
                "off_by_one", f"round {r.n} drafted {len(r.block)} and committed {r.end - r.block_start} tokens "
                f"with k={k}",
                f"{len(long)} round(s) drafted more than k, {len(runs)} committed more than k+1",
                "an off-by-one in the draft loop or the acceptance count (range(k + 1), "
                "accepting one token past the first mismatch)",
                "draft exactly k tokens; commit the accepted prefix plus one cloud token",
                _ev(r.cloud, r.block_start, r.block, round=r.n)))
    return out


@dataclass
class Evidence:
    """What every check reads: the recording, its tapes and rounds, the reconstructed trace and
    the declared knobs."""
    rec: dict
    t: object
    rounds: list
    texts: Texts
    trace: object
    trees: dict | None = None          # tree.normalize's info (raw tree forwards, paths)

    @property
    def declared(self) -> dict:
        return self.rec.get("declared", {})


def _rank_window(e: Evidence) -> list:
    """Accepted drafts the cloud ranks 2nd or lower against the declared window (greedy: 1),
    the built-in decoder's rule (acceptance.py); before check_lossless, whose finding of the
    same code then joins this one (roots.merge_repeats)."""
    d = e.declared
    return [] if d.get("temperature") else rank_findings(e.trace.tokens, d, e.t.P)


def _on_trace(check):
    def on_trace(e: Evidence) -> list:
        return check(e.trace)
    on_trace.__name__ = check.__name__
    return on_trace


def _on_task(check):
    def on_task(e: Evidence) -> list:
        return check(e.trace) if e.declared.get("prompt_type") else []
    on_task.__name__ = check.__name__
    return on_task


class CheckList(list):
    """Checks composed like a LogitsProcessorList: each maps the Evidence to its findings; the
    list runs them all, then folds echoes and links symptoms to their root (roots.py)."""

    def __call__(self, e: Evidence) -> list:
        found = [f for check in self for f in check(e)]
        found = named_causes.name(found, e.t, e.rounds, e.declared)   # penalty / first draft
        return link(sampling.dedupe(found))


# the checks a batch row that is not the clip's gets too (its output is inferred: its text,
# speed and sampling are not judged)
_ROW = [
    lambda e: checks.check_positions(e.t, skip_2d=bool(e.rec.get("mrope"))),
    lambda e: omni_checks.check_mrope(e.t, e.rec),
    lambda e: omni_checks.check_audio(e.t, e.rec),
    lambda e: checks.check_own_prompt(e.t, e.texts),
    lambda e: checks.check_contexts(e.t, e.rounds, e.texts),
    _rank_window,
    lambda e: output_checks.check_lossless(e.t, e.rounds, e.declared, e.texts),
    lambda e: output_checks.check_stops(e.t, e.rec, e.texts, e.rounds),
    lambda e: checks.check_draft_rule(e.t, e.rounds, e.declared, e.texts),
    lambda e: check_structure(e.t, e.rounds, e.rec, e.texts),
]
CHECKS = CheckList(_ROW + [
    lambda e: omni_checks.check_vocab(e.t, e.rec),
    lambda e: speed.check_speed(e.rec, e.t),
    lambda e: sampling.check_sampling(e.rec),
    lambda e: penalty_check.check(e.t, e.declared),     # a declared penalty under sampling
    lambda e: tree_sampling.check(e.rec, e.trees),
    lambda e: head_checks.check_stale_features(e.t),
    lambda e: not_judged.check_unseen(e.rec),
    collapse.check,
    verify_cost.check,
    *map(_on_trace, TRACE_CHECKS),
    *map(_on_task, TASK_CHECKS),
])
ROW_CHECKS = CheckList(_ROW)


def analyze(rec: dict, tokenizer, info=None, dependence=None):
    """recording -> (Trace, findings). The trace's diagnostics are the findings. `dependence`:
    decoding/dependence.py's result for the output, when the backend gives one."""
    check_recording(rec)                  # caps and consistency first (issue 36)
    check_fields(rec)                     # then each field's shape (issue 37)
    if batch_rows.batched(rec):           # batch > 1: every row on its own (normalize/)
        return _analyze_rows(rec, tokenizer, info, dependence)
    return _analyze_one(rec, tokenizer, info, dependence, CHECKS)


def _analyze_rows(rec: dict, tokenizer, info, dependence):
    rows, found = batch_rows.split(rec)
    if not rows:                          # the layout could not be read: say so, judge nothing
        one = dict(rec, forwards=[f for f in rec["forwards"] if (f.get("batch") or 1) <= 1])
        trace, _ = _analyze_one(one, tokenizer, info, None, CheckList())
        trace.diagnostics = found
        return trace, found
    trace, B = None, rows[0][2]["batch_size"]
    for b, clip, r in rows:
        t, f = _analyze_one(r, tokenizer, info, dependence if clip else None,
                            CHECKS if clip else ROW_CHECKS)
        # an inferred output ends where the recording does: where it ends is not judged
        found += [batch_rows.name_row(x, b, B, clip) for x in f
                  if clip or x["code"] != "unverified_end"]
        trace = t if clip else trace
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
    found.sort(key=lambda f: (SEVERITY.get(f["severity"], 9), bool(f["explained_by"])))
    trace.diagnostics = found
    return trace, found


def _analyze_one(rec: dict, tokenizer, info, dependence, check_list):
    rec, repaired, trees = normalize.run(rec, tokenizer)   # each family made canonical
    t = build_tapes(rec)
    rounds = tree_trace.fix_rounds(build_rounds(t))
    texts = Texts(tokenizer)
    trace = build_trace(rec, t, rounds, tokenizer, info)
    repaired += trees["findings"] + tree_trace.attach(trace, rounds, trees)
    attach(trace, dependence)
    # a text symptom of a loop shown exact (sampling with no sampling error) is the model's
    found = link(repaired + check_list(Evidence(rec, t, rounds, texts, trace, trees)))
    found = judge_text(incomplete.nest(found, incomplete.check_incomplete(t, texts)), rec)
    found.sort(key=lambda f: (SEVERITY.get(f["severity"], 9), bool(f["explained_by"])))
    trace.diagnostics = found
    return trace, found
