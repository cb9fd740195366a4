"""Evidence: what every check reads, built once per canonical recording, lazily, read-only
(docs/recorder.md, "Pipeline"). Pooled checks read a list of Evidence, one per distinct run
(`distinct`): the Evidence each judged result carries (specdec_core/result.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from specdec_core.recorder.evidence import tree_trace
from specdec_core.recorder.evidence.rounds import build_rounds
from specdec_core.recorder.evidence.tape import build_tapes
from specdec_core.recorder.evidence.trace_build import Texts, build_trace

CHAIN = {"shape": "chain", "trees": {}}


@dataclass(eq=False)
class Evidence:
    rec: dict                          # the canonical recording (normalize/)
    tokenizer: object = None
    info: dict | None = None           # the prompt's info (shown on the trace)
    dependence: dict | None = None     # decoding/dependence.py's result, when the backend gives one
    notes: dict = field(default_factory=dict)    # what the normalizers noted, by normalizer
    ctx: object = None                 # normalize.Context: forwards already replayed

    @property
    def declared(self) -> dict:
        return self.rec.get("declared", {})

    @property
    def trees(self) -> dict:
        """The tree normalizer's result (raw tree forwards, paths); a chain's is empty."""
        return self.notes.get("tree") or CHAIN

    @cached_property
    def _built(self) -> tuple:
        fw = self.rec.get("forwards") if isinstance(self.rec, dict) else None
        t = build_tapes(self.rec, self.ctx.replay(fw) if self.ctx is not None and isinstance(fw, list) else None)
        return t, tree_trace.fix_rounds(build_rounds(t))   # rounds also set t.resumed

    t = property(lambda self: self._built[0])              # the tapes
    rounds = property(lambda self: self._built[1])

    @cached_property
    def texts(self) -> Texts:
        return Texts(self.tokenizer)

    @cached_property
    def trace(self):
        from specdec_core.analysis.audio_dependence import attach

        trace = build_trace(self.rec, self.t, self.rounds, self.tokenizer, self.info)
        tree_trace.attach(trace, self.tree_rounds, self.trees)
        attach(trace, self.dependence)
        return trace

    @cached_property
    def tree_rounds(self) -> dict:
        """round n -> (its round["tree"], nodes drafted from another branch's context)."""
        return tree_trace.round_trees(self.rounds, self.trees)

    @cached_property
    def samples(self) -> list:
        """(edge forward, row, drafted id) of every draft made from the context the cloud
        verified. Tree rounds are left out: their nodes are chosen (top-k), not drawn
        (recorder/checks/tree/sampling.py). Unverified, a position drafted before a cloud forward
        scored may hold that forward's correction (the cloud fed another context): not a sample."""
        out, last = [], max((f.i for f in self.t.fwds if f.model == "cloud" and f.rows), default=-1)
        for rnd in self.rounds:
            ref = rnd.cloud.ctx if rnd.verified else self.t.C
            out += [(f, r, ref[p]) for p, (f, r) in rnd.drafted_by.items() if not rnd.is_tree
                    and max(rnd.block_start, self.t.P) <= p < len(ref) and f.ctx[:p] == ref[:p]
                    and (rnd.verified or f.i > last)]
        return out


def run_key(rec: dict) -> tuple:
    """What makes two runs the same evidence: every id each model was fed, in order (the same
    seed on the same prompt replays them all; a greedy-verified loop's output alone is not
    enough, its drafts differ by seed)."""
    fed = tuple((f.get("model"), tuple(f.get("ids") or ())) for f in rec.get("forwards") or ())
    return tuple(rec.get("prompt_ids") or ()), tuple(rec.get("out_ids") or ()), fed


def distinct(items: list) -> list:
    """One per distinct run (recordings or Evidence; the same seed replayed on the same prompt
    counts once): the one dedupe key of every pooled check."""
    seen, out = set(), []
    for x in items:
        key = run_key(x.rec if isinstance(x, Evidence) else x)
        if key not in seen:
            seen.add(key)
            out.append(x)
    return out

