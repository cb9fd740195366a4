"""The pair check (`python -m specdec_core check`, and every backend load): can this edge draft for
this cloud? Each check (checks.py, scope "pair") returns one finding or None; an error finding
makes the pair unusable (the backend load stops with its message)."""
from __future__ import annotations

import time

from specdec_core.errors import UserError
from specdec_core.pairs import versions
from specdec_core.findings import SEVERITIES, finding
from specdec_core.pairs import checks  # noqa: F401 - registers the pair checks
from specdec_core.recorder.checks import registry
from specdec_core.pairs.sides import Side, backend_paths, load_side

__all__ = ["Side", "check_backend", "check_folders", "error_message", "run_checks"]


def run_checks(edge: Side, cloud: Side) -> dict:
    found, passed = [], []
    t0 = time.perf_counter()
    for c in registry.of("pair"):
        try:
            f = c.fn(edge, cloud)
        except Exception as e:  # noqa: BLE001 - a check that cannot run never blocks a load
            f = finding("check_failed", f"Check {c.fn.__name__} could not run",
                        f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                        fix="report this pair to the SpecScope maintainers")
        else:
            registry.declared(c, [f] if f else [])
        (found.append(f) if f else passed.append(c.fn.__name__))
    found.sort(key=lambda f: SEVERITIES.index(f["severity"]))
    return {"checks": found, "passed": passed, "versions": versions.versions(),
            "device": versions.device(), "edge": edge.path, "cloud": cloud.path,
            "usable": not any(f["severity"] == "error" for f in found),
            "seconds": round(time.perf_counter() - t0, 3)}


def check_folders(edge_path: str, cloud_path: str) -> dict:
    return run_checks(load_side(edge_path, "edge"), load_side(cloud_path, "cloud"))


def check_backend(name: str, options: dict | None = None) -> dict:
    """The report for the folders backend `name` would load with `options` (no weights read).
    BackendError when the folders cannot be found or read at all."""
    edge, cloud = backend_paths(name, dict(options or {}))
    report = check_folders(edge, cloud)
    report["backend"] = name
    return report


def error_message(report: dict) -> str | None:
    """One line for the first error finding (None when the pair is usable)."""
    errors = [f for f in report["checks"] if f["severity"] == "error"]
    if not errors:
        return None
    f = errors[0]
    more = f" (+{len(errors) - 1} more: python -m specdec_core check)" if len(errors) > 1 else ""
    return f"pair check {f['code']}: {f['title']}: {f['detail']}; fix: {f['fix']}{more}"


def warning_lines(backend) -> list[str]:
    """The load-time check's warnings on `backend`, one line each (run and record print them)."""
    report = getattr(backend, "pair_check", None) or {"checks": []}
    return [f"pair check warning {f['code']}: {f['title']}: {f['detail']}"
            for f in report["checks"] if f["severity"] == "warning"]


def backend_report(name: str, options: dict | None = None) -> tuple[dict | None, str | None]:
    """(report, None), or (None, the one-line reason) when the folders cannot be read (the app's
    pair panel shows either)."""
    try:
        return check_backend(name or "demo", options), None
    except UserError as e:
        return None, str(e)
