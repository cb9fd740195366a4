"""Issue 43: the decode slots are shared round by round (specdec_core/slots.py). Two long runs
hold both slots; a third run that arrives gets the slot the first of them releases at its next
round boundary, ahead of that run's next round. Each round here waits for the test's go-ahead,
so the order is decided by the scheduler, not by how fast this machine is."""
from __future__ import annotations

import threading

import pytest
from poll import wait_until

from specdec_core.slots import RoundSlots


def until(cond, what: str) -> None:
    """Poll for a state (a broken scheduler that never reaches it: pytest-timeout ends the test)."""
    wait_until(cond, what, every=0.005)


class GatedRun:
    """A run whose every round starts (logged) and then waits until the test lets it finish."""

    def __init__(self, name: str, log: list, rounds: int = 10_000):
        self.name, self.log, self.n = name, log, rounds
        self.go = threading.Semaphore(0)
        self.done = threading.Event()

    def events(self):
        i = 0
        while i < self.n:
            self.log.append((self.name, i))
            self.go.acquire()
            yield (self.name, i)
            i += 1

    def start(self, slots: RoundSlots, cancel=None) -> threading.Thread:
        def body():
            for _ in slots.rounds(self.events(), self.name, cancel):
                pass
            self.done.set()
        t = threading.Thread(target=body, daemon=True)
        t.start()
        return t


def test_a_third_run_gets_the_slot_a_long_run_releases_at_its_round_boundary():
    slots, log = RoundSlots(2), []
    h1, h2 = GatedRun("h1", log), GatedRun("h2", log)
    h1.start(slots), h2.start(slots)
    until(lambda: {("h1", 0), ("h2", 0)} <= set(log), "both long runs in their first round")
    assert slots.busy() == 2
    ordinary = GatedRun("ordinary", log, rounds=2)
    ordinary.start(slots)
    until(lambda: slots.waiting() == 1, "the ordinary run in line")
    assert ("ordinary", 0) not in log                 # both slots are held: it waits ...
    h1.go.release()                                   # ... for one round of one long run
    until(lambda: ("ordinary", 0) in log, "the ordinary run's first round")
    until(lambda: slots.waiting() == 1, "h1 back in line")
    assert ("h1", 1) not in log, log                  # h1's next round queues behind it
    assert slots.grants[-1] == "ordinary" and slots.grants.count("h1") == 1, slots.grants
    ordinary.go.release()                             # its round ends: h1 (first in line) goes on,
    until(lambda: ("h1", 1) in log, "h1's second round")   # the ordinary run now waits behind h1
    h2.go.release()                                   # h2's round ends: the ordinary run's turn
    until(lambda: ("ordinary", 1) in log, "the ordinary run's second round")
    assert ("h2", 1) not in log, log
    ordinary.go.release()                             # the ordinary run's last round ends and h2
    until(lambda: ("h2", 1) in log, "h2's second round")   # (in line) takes the slot;
    h1.go.release()                                   # at h1's next boundary the ordinary run ends
    assert ordinary.done.wait(60), "the ordinary run did not finish"
    assert log[2:6] == [("ordinary", 0), ("h1", 1), ("ordinary", 1), ("h2", 1)], log
    for run in (h1, h2):                              # end the long runs
        run.n = 0
        run.go.release()
    until(lambda: h1.done.is_set() and h2.done.is_set() and slots.busy() == 0, "all slots free")


def test_a_run_alone_keeps_its_slot_round_after_round_and_frees_it_when_closed():
    slots = RoundSlots(1)
    gen = slots.rounds(iter(range(5)), "alone")
    assert next(gen) == 0 and slots.busy() == 0       # between rounds (streaming) no slot is held
    assert list(gen) == [1, 2, 3, 4] and slots.busy() == 0 and slots.grants == ["alone"] * 6   # the 6th: the end
    closed = []

    def events():
        try:
            yield from range(100)
        finally:
            closed.append(True)
    gen = slots.rounds(events(), "stopped")
    next(gen)
    gen.close()                                       # a cancelled Gradio generator
    assert closed == [True] and slots.busy() == 0


def test_a_stopped_run_waiting_for_a_slot_leaves_the_line():
    slots, log = RoundSlots(1), []
    long = GatedRun("long", log)
    long.start(slots)
    until(lambda: slots.busy() == 1, "the long run holds the slot")
    cancel = threading.Event()
    got = []
    t = threading.Thread(target=lambda: got.append(slots.acquire("waiting", cancel)), daemon=True)
    t.start()
    until(lambda: slots.waiting() == 1, "a run in line")
    cancel.set()
    t.join(60)
    assert got == [False] and slots.waiting() == 0 and slots.busy() == 1
    long.n = 0
    long.go.release()
    until(lambda: long.done.is_set() and slots.busy() == 0, "the slot free")


def test_one_slot_call_holds_a_slot_for_its_duration():
    slots = RoundSlots(2)
    assert slots.call(lambda x: (x, slots.busy()), 3, owner="ref") == (3, 1)
    assert slots.busy() == 0
    with pytest.raises(ZeroDivisionError):
        slots.call(lambda: 1 / 0)
    assert slots.busy() == 0


def test_work_in_one_call_offers_its_slot_between_steps_to_a_run_in_line():
    """A cloud-only reference decode (one generate() call) holds its slot across steps only
    while nobody waits: at its next step it hands the slot to the run in line."""
    from specdec_core.slots import pass_turn

    slots, log = RoundSlots(1), []
    step_go = [threading.Semaphore(0) for _ in range(3)]

    def reference():
        for i in range(3):
            log.append(("reference", i))
            step_go[i].acquire()
            pass_turn()                                   # what cloud_only's PassTurn does
        return "done"

    result = []
    t = threading.Thread(target=lambda: result.append(slots.call(reference, owner="reference")), daemon=True)
    t.start()
    until(lambda: ("reference", 0) in log, "the reference's first step")
    pass_turn()                                           # outside a slot: nothing happens
    step_go[0].release()                                  # nobody waits: it keeps the slot
    until(lambda: ("reference", 1) in log, "the reference's second step")
    ordinary = GatedRun("ordinary", log, rounds=1)
    ordinary.start(slots)
    until(lambda: slots.waiting() == 1, "the ordinary run in line")
    step_go[1].release()                                  # at the step boundary: its turn
    until(lambda: ("ordinary", 0) in log, "the ordinary run's round")
    assert ("reference", 2) not in log, log
    ordinary.go.release()                                 # its round ends: the reference's turn
    until(lambda: ("reference", 2) in log, "the reference's last step")
    step_go[2].release()
    t.join(60)
    assert ordinary.done.wait(60) and result == ["done"] and slots.busy() == 0


def test_cloud_only_passes_its_turn_between_generate_steps(monkeypatch):
    """The shipped demo pair's cloud-only decode calls pass_turn once per generated token."""
    from specdec_core.api import prepare
    from specdec_core.backends import load_backend
    from specdec_core.decoding import baseline
    from specdec_core.decoding.config import DecodeConfig

    calls = []
    monkeypatch.setattr(baseline, "pass_turn", lambda: calls.append(1))
    backend = load_backend("demo")
    cfg = DecodeConfig(max_new_tokens=6, stop_at_first_sentence=False)
    res = baseline.cloud_only(backend, prepare(backend, "sample_audio/sad_01.wav", cfg), cfg)
    assert len(calls) == len(res["token_ids"]) >= 1
