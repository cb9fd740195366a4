"""The one registry of checks (docs/recorder.md, "Adding a check": the scopes, `order`, `pooled`,
the declared codes): `@check("code_a", "code_b", scope="row", order=50, pooled=fn)` on
`fn(e: Evidence) -> list[Finding]`; `load` imports every module under recorder/checks/."""
from __future__ import annotations

import importlib
import os
import pkgutil
from dataclasses import dataclass
from functools import cache
from typing import Callable

from specdec_core.findings import REGISTRY

SCOPES = ("row", "clip", "request", "run", "pair")
LOOP = ("row", "clip")         # the scopes that read a loop's Evidence (and have pooled forms)


@dataclass(frozen=True)
class Check:
    fn: Callable
    codes: tuple
    scope: str
    order: float
    pooled: Callable | None = None
    pooled_order: float = 100


CHECKS: list[Check] = []


def check(*codes: str, scope: str = "clip", order: float = 100, pooled: Callable | None = None,
          pooled_order: float | None = None):
    """Register `fn(e: Evidence) -> list[Finding]` (see the module doc)."""
    unknown = [c for c in codes if c not in REGISTRY]
    assert not unknown, f"finding codes {unknown} are not registered in specdec_core/findings.py"
    assert scope in SCOPES, scope

    def register(fn):
        CHECKS.append(Check(fn, codes, scope, order, pooled, order if pooled_order is None else pooled_order))
        CHECKS.sort(key=lambda c: c.order)
        return fn
    return register


def ev(f=None, position=None, tokens=None, **kw) -> dict:
    """A finding's evidence: the model and forward of `f` (a Fwd; None: no one forward), the
    position and tokens it names, then the check's own fields."""
    return {"model": f.model if f else None, "forward": f.i if f else None, "position": position,
            "tokens": tokens, **kw}


def pooled_sum(collect: Callable, judge: Callable, scope: str = "{n} distinct runs pooled") -> Callable:
    """The pooled form of a check written as `judge(collect(e), "this run")`: every run's data
    summed key by key (lists joined, counts added, anything else the last run's), judged once
    (2+ runs)."""
    def pooled(runs: list) -> list:
        data: dict = {}
        for e in runs:
            for k, v in collect(e).items():
                data[k] = data[k] + v if k in data and isinstance(v, (list, int, float)) else v
        return judge(data, scope.format(n=len(runs))) if len(runs) > 1 else []
    return pooled


@cache
def load() -> None:
    """Import every module under recorder/checks/ once (each registers its checks)."""
    from specdec_core.recorder import checks as pkg

    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        importlib.import_module(m.name)


def declared(c: Check, found: list) -> list:
    """`found` as emitted by `c`; under tests (SPECSCOPE_STRICT_CODES=1, set by tests/conftest.py)
    a code the check did not declare is an AssertionError."""
    if os.environ.get("SPECSCOPE_STRICT_CODES") == "1":
        stray = sorted({f["code"] for f in found} - set(c.codes))
        assert not stray, f"{c.fn.__module__}.{c.fn.__name__} emitted undeclared codes {stray}"
    return found


def of(scope: str) -> list:
    """The registered checks that run in `scope`, in order: "clip" has the row and clip checks."""
    return [c for c in CHECKS if c.scope in (LOOP if scope == "clip" else (scope,))]


def run(e, scope: str = "clip") -> list:
    """Every registered check of the scope on `e` ("row": a batch row that is not the clip)."""
    load()
    return [f for c in of(scope) for f in declared(c, c.fn(e))]


def run_pooled(evidences: list) -> list:
    """Every pooled form over the clips' Evidence (one per distinct run), in order."""
    load()
    forms = sorted((c for c in CHECKS if c.pooled and c.scope in LOOP), key=lambda c: c.pooled_order)
    return [f for c in forms for f in declared(c, c.pooled(evidences))]
