"""The recorder's normalize stage (docs/recorder.md, "Pipeline"): each family of loops is made
canonical before the evidence and the checks read it. One module per assumption removed, one
signature `normalize(rec, ctx) -> (rec, notes)`, run in the order of NORMALIZERS: retokenized
(an edge with its own tokenizer), dropped (ids dropped from the returned output), shift (a
drafter fed one position behind: EAGLE's head), window (a drafter fed a sliding window of
the committed text), generated (a verifier that generates its tokens: its forwards one round), tree (a verified tree read as the chain of its
accepted path). A normalizer never builds tapes or rounds and never emits a finding: its notes
are turned into findings by a check (checks/noted/, checks/tree/). Where a sampling loop resumed
is read with the rounds (evidence/resumed.py). `batch_rows` comes first, in analyze: a batch > 1
recording split into one single-row recording per row, each then normalized by `run`."""
from __future__ import annotations

from specdec_core.recorder.normalize.replayed import replay
from specdec_core.recorder.normalize import dropped, generated, retokenized, shift, tree, window


class Context:
    """What the normalizers of one recording share: the tokenizer, and forwards already replayed
    (evidence/tape.replay), which the evidence reuses where no normalizer changed them."""

    def __init__(self, tokenizer=None):
        self.tokenizer = tokenizer
        self._replayed: dict = {}

    def replay(self, forwards: list) -> list:
        hit = self._replayed.get(id(forwards))
        if hit is None or hit[0] is not forwards:
            hit = self._replayed[id(forwards)] = (forwards, replay(forwards))
        return hit[1]


NORMALIZERS = [retokenized.normalize, dropped.normalize, shift.normalize, window.normalize,
               generated.normalize, tree.normalize]


def run(rec: dict, ctx: Context) -> tuple[dict, dict]:
    """Every normalizer in order -> (the canonical recording, their notes by name)."""
    notes: dict = {}
    for normalize in NORMALIZERS:
        rec, n = normalize(rec, ctx)
        notes.update(n)
    return rec, notes
