"""The one registry of the recorder's checks (docs/recorder.md, "Adding a check").

A check is a function of the `Evidence` (recorder/evidence/) returning its findings, registered
where it is defined:

    from specdec_core.recorder.checks.registry import check

    @check("stale_cache", "context_mismatch", scope="row", order=50, pooled=None)
    def contexts(e: Evidence) -> list[Finding]:
        return ...                          # read e.t, e.rounds, e.trace, e.trees, e.notes ...

- codes: the finding codes it may emit (each registered in specdec_core/findings.py, with its
  facts: root or symptom, what it explains, about the end, text symptom).
- scope: "row" runs on every row of a batch (the clip's included); "clip" on the clip's row (or
  the recording) only: its text, speed and sampling are judged there.
- order: where it runs (lower first); findings of one code merge into the first one's, and the
  report sorts by severity only, so the order decides the titles shown.
- pooled: a function of the list of every clip's Evidence (canonical recordings, one per
  distinct run: `distinct`) returning pooled findings; it runs from `run_pooled` (record,
  run and the Inspect tab), with two or more distinct clips.

Every module under recorder/checks/ is imported by `load()`: a new check is its module and its
registration, nothing else to edit. `analyze` runs `run(e, scope)`, then the report folds once
(recorder/report/)."""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Callable

from specdec_core.findings import REGISTRY

SCOPES = ("row", "clip")


@dataclass(frozen=True)
class Check:
    fn: Callable
    codes: tuple
    scope: str
    order: float
    pooled: Callable | None = None


CHECKS: list[Check] = []
POOLED: list[tuple[float, Callable]] = []     # pooled forms registered without a per-clip check


def check(*codes: str, scope: str = "clip", order: float = 100, pooled: Callable | None = None):
    """Register `fn(e: Evidence) -> list[Finding]` (see the module doc)."""
    assert scope in SCOPES, scope
    unknown = [c for c in codes if c not in REGISTRY]
    assert not unknown, f"finding codes {unknown} are not registered in specdec_core/findings.py"

    def register(fn):
        CHECKS.append(Check(fn, codes, scope, order, pooled))
        CHECKS.sort(key=lambda c: c.order)
        return fn
    return register


def pooled_check(*codes: str, order: float = 100):
    """Register a pooled form that has no per-clip check of its own: fn(list[Evidence])."""
    unknown = [c for c in codes if c not in REGISTRY]
    assert not unknown, f"finding codes {unknown} are not registered in specdec_core/findings.py"

    def register(fn):
        POOLED.append((order, fn))
        POOLED.sort(key=lambda p: p[0])
        return fn
    return register


_LOADED = False


def load() -> None:
    """Import every module under recorder/checks/ once (each registers its checks)."""
    global _LOADED
    if _LOADED:
        return
    from specdec_core.recorder import checks as pkg

    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        importlib.import_module(m.name)
    _LOADED = True


def run(e, scope: str = "clip") -> list:
    """Every registered check of the scope ("row": a batch row that is not the clip) on `e`."""
    load()
    return [f for c in CHECKS if scope == "clip" or c.scope == "row" for f in c.fn(e)]


def run_pooled(evidences: list) -> list:
    """Every pooled form over the clips' Evidence (one per distinct run), in order."""
    load()
    forms = sorted([(c.order, c.pooled) for c in CHECKS if c.pooled] + POOLED, key=lambda p: p[0])
    return [f for _, fn in forms for f in fn(evidences)]
