"""The trace's own checks (analysis/diagnostics.py, shared with the built-in decoder's trace),
registered: the text checks on every recording, the task checks where a prompt type is declared;
each check's codes are those registered with its name as their `trace` fact (findings.py)."""
from __future__ import annotations

from specdec_core.analysis import diagnostics as d
from specdec_core.findings import REGISTRY
from specdec_core.recorder.checks.registry import check

def codes(fn) -> tuple:
    return tuple(c.code for c in REGISTRY.values() if c.trace == fn.__name__)


def _register(fn, order: float, task: bool) -> None:
    def on_trace(e) -> list:
        return fn(e.trace) if not task or e.declared.get("prompt_type") else []
    on_trace.__name__ = fn.__name__
    check(*codes(fn), order=order)(on_trace)


for i, fn in enumerate(d.TRACE_CHECKS):
    _register(fn, 200 + i, task=False)
for i, fn in enumerate(d.TASK_CHECKS):
    _register(fn, 300 + i, task=True)
