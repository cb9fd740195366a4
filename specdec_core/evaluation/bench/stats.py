"""The one timing loop, its statistics and the one speed-up formula, used by bench, the page's
speed cards and batch. speedup = median baseline / median decode; spread: hi = slowest baseline
/ fastest decode, lo = fastest baseline / slowest decode. Repeats are interleaved (prompts
0 1 … m, then m … 1 0, then 0 1 … m again) so that drift on the machine falls on every job alike."""
from __future__ import annotations

import statistics
import time

REPEATS = 3


class Stopped(Exception):
    """Raised by a job to end the timing (Stop pressed, a time limit): time_jobs returns None."""


def interleaved_order(n_jobs: int, n: int = REPEATS) -> list[int]:
    """Job indices in timing order over `n` repeats: 0 1 … m, then m … 1 0, then 0 1 … m."""
    jobs = list(range(n_jobs))
    return [j for i in range(n) for j in (jobs if i % 2 == 0 else jobs[::-1])]


def time_jobs(backend, prompts, jobs: dict, repeats: int = REPEATS, log=None, tag: str = "",
              clock=time.perf_counter, cancel=None) -> tuple[dict, dict] | None:
    """Seconds of every job (name -> (runner, cfg) or (runner, cfg, own)) over all prompts, per
    repeat, and each job's outputs in the first repeat; `own(output)` is the job's own time for that
    output instead of `clock` around the call. None when cancelled or a job raises Stopped."""
    names = list(jobs)
    times, first = {j: [0.0] * repeats for j in names}, {j: [] for j in names}
    order = interleaved_order(len(names), repeats)
    try:
        for rep in range(repeats):
            for p in prompts:
                for j in (names[i] for i in order[rep * len(names):(rep + 1) * len(names)]):
                    if cancel is not None and cancel.is_set():
                        return None
                    fn, cfg, *own = jobs[j]
                    t0 = clock()
                    out = fn(backend, p, cfg)
                    times[j][rep] += own[0](out) if own else clock() - t0
                    if rep == 0:
                        first[j].append(out)
            if log:
                log(f"{tag}repeat {rep + 1}/{repeats}: " + "  ".join(f"{j}={times[j][rep]:.3f}s" for j in names))
    except Stopped:
        return None
    return times, first


def spread(values: list[float], digits: int | None = 4) -> tuple[float, list[float]]:
    """Median and [min, max] of per-repeat values, rounded (digits None: as they are)."""
    r = (lambda x: x) if digits is None else (lambda x: round(x, digits))
    return r(statistics.median(values)), [r(min(values)), r(max(values))]


def percentile(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, max(0, round(q * (len(v) - 1))))]


def busy_factor(*samples) -> float:
    """The largest max/min over the jobs' repeats (1.0 for steady timings)."""
    return max([max(xs) / min(xs) for xs in samples if xs and min(xs) > 0] or [1.0])


def speedup(baseline_s: list[float], decode_s: list[float]) -> tuple[float, float, float]:
    """The speed-up formula (module docstring) with its conservative spread (lo, hi)."""
    return (statistics.median(baseline_s) / statistics.median(decode_s),
            min(baseline_s) / max(decode_s), max(baseline_s) / min(decode_s))


def paired(num: list[float], den: list[float]) -> list[float]:
    """Per-repeat ratios num / den, both timed in the same repeat."""
    return [a / b for a, b in zip(num, den)]


def ratio(num: list[float], den: list[float]) -> tuple[float, list[float]]:
    """speedup(num, den) rounded, as bench JSON gives it: value and [lo, hi]."""
    x, lo, hi = speedup(num, den)
    return round(x, 4), [round(lo, 4), round(hi, 4)]
