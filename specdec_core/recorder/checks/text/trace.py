"""The trace's own checks (analysis/diagnostics.py, shared with the built-in decoder's trace),
registered: the text checks on every recording, the task checks where a prompt type is declared."""
from __future__ import annotations

from specdec_core.analysis import diagnostics as d
from specdec_core.recorder.checks.registry import check

CODES = {"cycles": ("cycle",), "template_leak": ("template_leak",), "punct_flood": ("punct_flood",),
         "doubling": ("doubling",), "entropy_gate": ("always_verify", "never_verify"),
         "check_edge_mishears": ("edge_mishears",), "length": ("length",), "no_stop": ("no_stop",)}


def _register(fn, order: float, task: bool) -> None:
    def on_trace(e) -> list:
        return fn(e.trace) if not task or e.declared.get("prompt_type") else []
    on_trace.__name__ = fn.__name__
    check(*CODES.get(fn.__name__, ()), order=order)(on_trace)


for i, fn in enumerate(d.TRACE_CHECKS):
    _register(fn, 200 + i, task=False)
for i, fn in enumerate(d.TASK_CHECKS):
    _register(fn, 300 + i, task=True)
