"""Where a recording's time went, per round and in all (the hooks' timings of each forward):
read into the trace (trace_build.py) and the page's timing plot; the speed checks judge it
(checks/speed/speed.py)."""
from __future__ import annotations

from specdec_core.analysis.metrics import time_split


def _time(raw: dict):
    tm = raw.get("time")
    return tm if isinstance(tm, dict) and tm.get("dur") is not None else None


def _end(tm: dict) -> float:
    """When a timed forward's hooks were done (its start, its duration, its post hook)."""
    return tm["t"] + tm["dur"] + (tm["post"] or 0.0)


def _sums(fw: list) -> dict:
    """Seconds inside the timed forwards `fw`, per model, and in the recorder's hooks."""
    d = {"edge_s": 0.0, "cloud_s": 0.0, "recorder_s": 0.0}
    for f in fw:
        tm = _time(f)
        d[f"{f['model']}_s"] += tm["dur"]
        d["recorder_s"] += (tm["pre"] or 0.0) + (tm["post"] or 0.0)
    return d


def timed(rec: dict) -> bool:
    fw = rec.get("forwards") or []
    return bool(fw) and all(_time(f) is not None for f in fw)


def wall_of(rec: dict) -> float:
    wall = float(rec.get("wall_s") or 0.0)
    return max([wall] + [_end(_time(f)) for f in rec.get("forwards") or [] if _time(f)])


def recording_split(rec: dict) -> dict | None:
    """The whole recording's time split (analysis.metrics.time_split keys + recorder_s)."""
    return time_split([], wall_of(rec), **_sums(rec["forwards"])) if timed(rec) else None


def round_times(rec: dict, rounds) -> list[dict]:
    """Per rebuilt round: round_s, edge_s, cloud_s, recorder_s. A round runs from the end of
    the previous round's verifying cloud forward to the end of its own (the first from the
    recording's start, the last to its end), so the rounds add up to the wall."""
    if not timed(rec):
        return [{} for _ in rounds]
    return _by_stops(rec, [r.cloud.i if r.cloud is not None else None for r in rounds])


def loop_round_times(rec: dict) -> list[dict]:
    """Per round as the loop ran it (the edge forwards up to and including each cloud forward,
    as in the Inspect drill-down): no reconstruction needed, so any recording dict has it."""
    if not timed(rec):
        return []
    stops = [f["i"] for f in rec["forwards"] if f["model"] == "cloud"]
    if not stops or stops[-1] != len(rec["forwards"]) - 1:
        stops.append(None)
    return _by_stops(rec, stops)


def _by_stops(rec: dict, stops: list) -> list[dict]:
    fw = rec["forwards"]
    out, start, first = [], 0.0, 0
    for n, stop in enumerate(stops):
        last = n == len(stops) - 1
        stop = len(fw) - 1 if last or stop is None else stop
        d = _sums(fw[first: stop + 1])
        end = wall_of(rec) if last else _end(_time(fw[stop]))
        d["round_s"] = max(end - start, 0.0)
        out.append({k: round(v, 6) for k, v in d.items()})
        start, first = end, stop + 1
    return out
