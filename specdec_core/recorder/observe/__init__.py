"""Observers: each keeps one part of a recording. The Recorder (hooks.py) walks ONE ordered list,
`hooks.OBSERVERS`; adding an observer is its module (a subclass of `Observer`) plus one entry
there. For each entry, in list order, the Recorder:

- builds it, `cls(recorder)`, with the recording (`recorder.models`, `.distinct` (each model
  once, with its role), `.drafter`, `.declared`, `.tokenizer`, `.forwards` are set; a
  declaration no loop could apply raises UserError here);
- `attach()`: the hooks of its own (on layers, a head drafter, an inner model) as removable
  handles; the Recorder removes them when the run ends, also on an exception;
- `pre(f, call)` before each recorded forward: `f` is its record (ids, positions, cache id and
  length already set), `call` has role, module, args, kwargs and the ids, mask, cache passed;
- `post(f, call)` after it: `call` has role, `who` (the role the forward played: Depth sets it
  first), module, args, kwargs, output, logits and the cache it returned; the entries before
  have written their fields (Rows: `f["rows"]`, which Trees and Batches complete);
- `close()` when the run ends, before the hooks come off (again at finish): complete what is
  pending;
- `finish(recording)`: write its fields into the recording, after the core fields.

Fields are JSON-serialisable; docs/recorder.md holds the schema."""
from __future__ import annotations


class Observer:
    def __init__(self, recorder):
        self.r = recorder

    def attach(self) -> list:
        return []

    def pre(self, f: dict, call) -> None:
        pass

    def post(self, f: dict, call) -> None:
        pass

    def close(self) -> None:
        pass

    def finish(self, recording: dict) -> None:
        pass
