"""Waiting for a state in tests, without a deadline of our own.

A test must not assert a wall-clock time, a deadline included: on a shared, busy machine any
bound we pick is either too tight (a false failure) or meaningless. So these waits poll until
the state is reached and nothing else; a state that never comes is ended by pytest-timeout's
per-test limit (pyproject.toml, `timeout`), whose report shows this wait in the stack and the
`what` of the last wait entered (kept in `WAITING`)."""
from __future__ import annotations

import time

WAITING: list[str] = []     # what the test waits for now (read in a timeout's traceback)


def wait_until(cond, what: str, every: float = 0.05) -> None:
    """Poll `cond()` every `every` seconds until it is true."""
    WAITING[:] = [what]
    while not cond():
        time.sleep(every)
    WAITING.clear()
