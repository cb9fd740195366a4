"""The recorder's normalize stage (docs/recorder.md, "Pipeline": what each normalizer removes):
NORMALIZERS in order, each `normalize(rec, ctx) -> (rec, notes)`; a normalizer never builds tapes
or rounds and never emits a finding (a check turns its notes into findings). `batch_rows` comes
first, in analyze: one single-row recording per row of a batch > 1, each then normalized by `run`."""
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
