"""The recorder's normalize stage (docs/recorder.md, "Pipeline"): each family of loops is made
canonical before the evidence and the checks read it. One module per assumption removed:
retokenized (an edge with its own tokenizer), dropped (ids dropped from the returned output),
shift (a drafter fed one position behind: EAGLE's head), tree (a verified tree read as the chain
of its accepted path), resumed (where a sampling loop resumed: a correction equal to the rejected
draft is a correction, not an acceptance). `batch_rows` comes first, in analyze: a batch > 1
recording split into one single-row recording per row (padding, per-row cache lengths and
positions, slots a realignment moved), each then normalized by `run`."""
from __future__ import annotations

from specdec_core.recorder.normalize import dropped, resumed, retokenized, shift, tree


def run(rec: dict, tokenizer) -> tuple[dict, dict]:
    """All normalizers in order -> (canonical recording, notes: {"findings", "tree"})."""
    rec, retok = retokenized.translate(rec, tokenizer)   # an edge with its own tokenizer
    rec, repaired = dropped.repair(rec)
    rec, shifted = shift.normalize(rec)                  # a drafter fed one position behind
    rec, trees = tree.normalize(rec)      # tree forwards as the chains their accepted paths are
    rec = resumed.annotate(rec)           # where the loop resumed: a repeated draft was a correction
    return rec, {"findings": retok + repaired + shifted, "tree": trees}
