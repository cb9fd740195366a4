"""Report: the checks' findings folded once (docs/recorder.md, "Pipeline"): named causes,
one cause one code (`dedupe`), roots and their symptoms (roots.py, from the codes' registered
facts), a cut recording's nesting (incomplete.py), text symptoms of an exact loop
(model_or_decoder.py), and the order."""
from __future__ import annotations

from specdec_core.findings import REGISTRY, SEVERITIES
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


def pooled(found: list) -> list:
    """Pooled findings folded: one cause, one code."""
    return dedupe(found)
