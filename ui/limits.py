"""The operator's caps at the page's queue (issues 36, 37, 43; values: specdec_core/caps.py): runs
per session capped, a queued visitor told how many runs are ahead, decode slots shared round by round."""
from __future__ import annotations

import gradio as gr

from components.status import status_html
from specdec_core.caps import CAPS, cap
from specdec_core.slots import RoundSlots

DECODE = "decode"          # the concurrency id of every decode event (Live, A/B, Batch, API)
_QUEUE: list = [None]      # Gradio's queue once the page is queued (ui/page.queued)
# SLOTS rounds are computed at a time (2 CPU-bound decodes: more only slows everyone on a small
# machine); ADMIT decode events run at once (Gradio's concurrency limit on DECODE), taking turns
# for the slots round by round; more wait in Gradio's queue with the "waiting" status line.
DECODE_SLOTS = 2
ADMIT = 2 * DECODE_SLOTS
SLOTS = RoundSlots(DECODE_SLOTS)


def _events(queue, cid: str = DECODE) -> tuple[list, list, int | None]:
    """(waiting, running) decode events and the decode concurrency limit."""
    eq = queue.event_queue_per_concurrency_id.get(cid)
    waiting = list(getattr(eq, "queue", []))
    running = [e for job in list(queue.active_jobs) if job for e in job if e.concurrency_id == cid]
    return waiting, running, getattr(eq, "concurrency_limit", None)


def install(queue) -> None:
    """Cap each session's decode runs at runs_per_session (a run beyond it is refused with one line)."""
    _QUEUE[0] = queue
    push = queue.push

    async def guarded(body, request, username):
        from gradio import route_utils

        fn = route_utils.get_fn(queue.blocks, None, body) if body.fn_index is not None else None
        n = cap("runs_per_session")
        waiting, running, _ = _events(queue)          # this session's decode runs, queued or running
        if fn is not None and fn.concurrency_id == DECODE and sum(
                e.session_hash == body.session_hash for e in [*waiting, *running]) >= n:
            return (False, f"You already have {n} run{'s' if n != 1 else ''} queued or running "
                    f"(this server's cap on runs per session; the operator raises it with "
                    f"{CAPS['runs_per_session'].env}): wait for it to finish or stop it first.", "error")
        return await push(body, request, username)

    queue.push = guarded


def runs_ahead(session: str | None) -> tuple[int, int | None]:
    """(other sessions' runs a new run of `session` waits for, 0 when a slot is free; the limit)."""
    if _QUEUE[0] is None:
        return 0, None
    waiting, running, limit = _events(_QUEUE[0])
    waiting = [e for e in waiting if e.session_hash != session]
    running = [e for e in running if e.session_hash != session]
    if not waiting and (limit is None or len(running) < limit):
        return 0, limit
    return len(waiting) + len(running), limit


def waiting_status(request: gr.Request | None = None):
    """"waiting: N runs ahead" while a run is queued (a skip when it starts at once)."""
    n, limit = runs_ahead(getattr(request, "session_hash", None))
    if not n:
        return gr.skip()
    return status_html("run", f"waiting: {n} run{'s' if n != 1 else ''} ahead",
                       f"this server runs {limit} decodes at a time, taking turns round by round; "
                       "yours starts when one ends")


# take_turns(events, owner, cancel): a decode's events, each round computed in one of the decode
# slots, in turn with every other decode; in_slot(fn, *args): other work in one slot
take_turns, in_slot = SLOTS.rounds, SLOTS.call


def release_memory() -> None:
    """After a large upload or analysis: collect garbage and give freed heap pages back to the system."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):   # not glibc: the collection is all there is
        pass
