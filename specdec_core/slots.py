"""Decode slots shared round by round (issue 43): a server that decodes N runs at a time gives a
slot to a run for ONE round (one step of its event stream), not for the whole run, so a run that
arrives while long runs hold every slot waits for at most one round; inside a round the drafter
offers the slot between draft steps (`pass_turn()`, a no-op outside a slot), so a long round (k 32)
does not hold it either. One-call work (a cloud-only reference decode) runs in a slot with `call`.
The line is first come, first served (tickets in a deque under one Condition); no Gradio here
(ui/limits.py wires it to the page's decode events)."""
from __future__ import annotations

import threading
from collections import deque

_HELD = threading.local()          # (scheduler, owner) while this thread runs in RoundSlots.call


def pass_turn() -> None:
    """Between two steps of work running in a slot (RoundSlots.call): when another run waits in
    line, give it the slot and take the next turn; otherwise go on. No-op outside a slot."""
    held = getattr(_HELD, "slot", None)
    if held is not None:
        held[0].pass_turn(held[1])


class RoundSlots:
    """`slots` decode slots, handed out one round at a time in arrival order."""

    def __init__(self, slots: int):
        self.slots = max(1, int(slots))
        self._cv = threading.Condition()
        self._busy = 0
        self._line: deque = deque()
        self.grants: list = []       # the owners in the order they got a slot (the last 1000)

    def busy(self) -> int:
        with self._cv:
            return self._busy

    def waiting(self) -> int:
        with self._cv:
            return len(self._line)

    def acquire(self, owner=None, cancel: threading.Event | None = None) -> bool:
        """Wait in line for a slot; True once it is held. False, without a slot, when `cancel`
        is set while waiting (a stopped run ends within its next round, so it need not wait)."""
        ticket = object()
        with self._cv:
            self._line.append(ticket)
            while not (self._busy < self.slots and self._line[0] is ticket):
                if cancel is not None and cancel.is_set():
                    self._line.remove(ticket)
                    self._cv.notify_all()
                    return False
                self._cv.wait(0.2 if cancel is not None else None)
            self._line.popleft()
            self._busy += 1
            self.grants = [*self.grants[-999:], owner]
            self._cv.notify_all()       # the next in line may take a slot still free
            return True

    def release(self) -> None:
        with self._cv:
            self._busy -= 1
            self._cv.notify_all()

    def pass_turn(self, owner=None) -> None:
        """Held slot: released to the first in line, if any, and taken again in turn."""
        with self._cv:
            if not self._line:
                return
        self.release()
        self.acquire(owner)

    def rounds(self, events, owner=None, cancel: threading.Event | None = None):
        """The events of one run, each computed while holding a slot; the slot is released
        before the event is handed on (streaming to a page holds no slot) and taken again, at
        the back of the line, for the next one."""
        it = iter(events)
        try:
            while True:
                held = self.acquire(owner, cancel)
                before, _HELD.slot = getattr(_HELD, "slot", None), (self, owner) if held else None
                try:
                    ev = next(it)          # may pass_turn() between draft steps (decoding/steps.py)
                except StopIteration:
                    return
                finally:
                    _HELD.slot = before
                    if held:
                        self.release()
                yield ev
        finally:
            close = getattr(it, "close", None)
            if close is not None:
                close()

    def call(self, fn, *args, owner=None, **kwargs):
        """fn(*args, **kwargs) in one slot (work that is not a stream of rounds, e.g. a
        cloud-only reference decode); fn may offer the slot between its steps (pass_turn).
        It is a stream of one round: its one event is fn's result."""
        return next(self.rounds((fn(*args, **kwargs) for _ in (0,)), owner))
