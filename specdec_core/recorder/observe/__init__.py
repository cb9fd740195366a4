"""Observers: each keeps one part of a recording, in ONE ordered list, `hooks.OBSERVERS` (docs/recorder.md,
"Pipeline": a new observer is its module, a subclass of `Observer`, plus one entry there). Each is built
as `cls(recorder)` (`recorder.models`, `.distinct`, `.drafter`, `.declared`, `.tokenizer`, `.forwards` set;
a declaration no loop could apply raises UserError here), then called in list order as below; the
fields they write are JSON-serialisable (the schema: docs/recorder.md)."""
from __future__ import annotations

import torch


def ints(t) -> list[int] | None:
    """Ids as ints: a sequence, a tensor (row 0 of a [batch, n] one); None for None."""
    if t is None:
        return None
    if isinstance(t, torch.Tensor):
        return [int(x) for x in (t[0] if t.dim() == 2 else t).reshape(-1).tolist()]
    return [int(x) for x in t]


def fed_next(held: tuple | None, ids, i: int) -> None:
    """`rows["fed_next"]` of held = (the previous forward of a role, or its batch row; its last
    row's log-probs): the rank and log-prob under that row of the token the same model's next
    forward (index i) was fed first, `ids[0]` (what a drafter needs)."""
    if held is None or not ids or not held[0].get("rows"):
        return
    rows, logp, tok = held[0]["rows"], held[1], ids[0]
    if 0 <= tok < logp.shape[-1]:
        rows["fed_next"] = {"forward": i, "token": tok, "rank": int((logp > logp[tok]).sum()) + 1,
                            "logp": round(float(logp[tok]), 5)}


class Observer:
    def __init__(self, recorder):
        self.r = recorder

    def attach(self) -> list:
        """Hooks of its own (on layers, a head drafter, an inner model) as removable handles: the
        Recorder removes them when the run ends, also on an exception."""
        return []

    def pre(self, f: dict, call) -> None:
        """Before each recorded forward: `f` its record (ids, positions, cache id and length set),
        `call` has role, module, args, kwargs and the ids, mask and cache passed."""

    def post(self, f: dict, call) -> None:
        """After it: `call` has role, `who` (the role it played: Depth sets it first), module,
        args, kwargs, output, logits and the cache returned; the entries before have written
        their fields (Rows: `f["rows"]`, which Trees and Batches complete)."""

    def close(self) -> None:
        """The run ended, before the hooks come off (again at finish): complete what is pending."""

    def finish(self, recording: dict) -> None:
        """Write its fields into the recording, after the core fields."""
