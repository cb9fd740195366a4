"""Speed-ups measured honestly (issue 43): every side timed on quiet repeats interleaved with the
cloud-only decode, the speed-up given with its spread, and checked against the bound that the
measured acceptance allows. The timing loop runs the engine; the rest are pure functions.

    time_interleaved(backend, sides, n, cancel) -> [[seconds, ...] per side]
    speedup_stats(decode_s, cloud_s, tokens, cloud_calls, same_text) -> the figure the page shows

The spread is conservative: the slowest cloud-only repeat over the fastest decode, and the fastest
cloud-only repeat over the slowest decode. When it covers 1.0 the page says "no measurable
difference" instead of a number."""
from __future__ import annotations

import statistics
import threading

REPEATS = 3
BUSY = 2.0      # a side whose quiet repeats vary by more than this factor: the machine is busy
BUSY_WORDS = ("timing not possible now: the repeats disagree (one decode's varied up to {f:.1f}×: the machine "
              "is busy); `python -m specdec_core bench` measures speed on a quiet machine")


def busy_factor(*samples) -> float:
    """The largest max/min over the sides' repeats (1.0 for steady timings)."""
    return max([max(xs) / min(xs) for xs in samples if xs and min(xs) > 0] or [1.0])


def interleaved_order(n_sides: int, n: int = REPEATS) -> list[int]:
    """Side indices in timing order: 0 1 … m, then m … 1 0, then 0 1 … m again, so that drift
    on the machine falls on every side alike."""
    sides = list(range(n_sides))
    return [s for i in range(n) for s in (sides if i % 2 == 0 else sides[::-1])]


def time_interleaved(backend, sides: list[tuple[str, object, object]], n: int = REPEATS,
                     cancel: threading.Event | None = None) -> list[list[float]] | None:
    """Seconds of each side, `n` quiet repeats interleaved (interleaved_order). A side is
    ("decode", cfg, prompt): the speculative decoder without trace or page drawing, its own time
    (time_split total); or ("cloud_only", cfg, prompt): HF generate alone, its wall time. None when
    cancelled or a decode hits its time limit."""
    from specdec_core.decoding.baseline import cloud_only
    from specdec_core.decoding.decoder import SpeculativeDecoder

    cancel = cancel or threading.Event()
    out: list[list[float]] = [[] for _ in sides]
    for i in interleaved_order(len(sides), n):
        if cancel.is_set():
            return None
        kind, cfg, prompt = sides[i]
        if kind == "cloud_only":
            out[i].append(cloud_only(backend, prompt, cfg)["wall_s"])
            continue
        tr = SpeculativeDecoder(backend, cfg, trace=False, dependence=False).run(prompt, cancel)
        if tr.ended_by in ("cancelled", "time_limit"):
            return None
        split = tr.metrics.get("time_split") or {}
        out[i].append(split.get("total_s") or tr.metrics["wall_s"])
    return out


def bound(tokens: int | None, cloud_calls: int | None) -> float | None:
    """The most a run with this acceptance can gain over cloud-only: tokens per cloud call (the
    cost model with free drafting and a verify forward no dearer than one cloud-only step; the
    Leviathan formula at c = 0). None without a cloud call (nothing was checked)."""
    if not tokens or not cloud_calls:
        return None
    return tokens / cloud_calls


def speedup_stats(decode_s: list[float], cloud_s: list[float], tokens: int | None = None,
                  cloud_calls: int | None = None, same_text: bool | None = None) -> dict | None:
    """The speed-up over cloud-only from interleaved repeats: median cloud-only time over median
    decode time, its spread (lo, hi), and what the page may say:
    verdict "faster" | "slower" | "no measurable difference" (the spread covers 1.0);
    lossy: the output differs from cloud-only (the figure is the speed of a different output);
    above_bound: the median exceeds what the measured acceptance allows (bound())."""
    if not decode_s or not cloud_s or min(decode_s) <= 0 or min(cloud_s) <= 0:
        return None
    d, c = statistics.median(decode_s), statistics.median(cloud_s)
    x, lo, hi = c / d, min(cloud_s) / max(decode_s), max(cloud_s) / min(decode_s)
    verdict = "no measurable difference" if lo <= 1.0 <= hi else ("faster" if lo > 1.0 else "slower")
    if busy_factor(decode_s, cloud_s) > BUSY:      # no verdict: one line says so (busy_words)
        verdict = "busy"
    b = bound(tokens, cloud_calls)
    return {"speedup": x, "lo": lo, "hi": hi, "decode_s": d, "cloud_only_s": c,
            "decode_samples": list(decode_s), "cloud_samples": list(cloud_s), "repeats": len(decode_s),
            "verdict": verdict, "lossy": same_text is False, "bound": b,
            "above_bound": b is not None and x > b}


def speedup_words(sp: dict) -> str:
    """The one-line claim: '1.42× faster than cloud-only (1.30–1.55×)', 'no measurable
    difference from cloud-only (0.91–1.12×)', or for a lossy run 'speed of a different output'."""
    rng = f"{sp['lo']:.2f}–{sp['hi']:.2f}×"
    if sp.get("verdict") == "busy":
        return ("output differs from cloud-only; " if sp.get("lossy") else "") + busy_words(sp)
    if sp.get("lossy"):
        return f"speed of a different output: {sp['speedup']:.2f}× cloud-only's ({rng}); not a speed-up"
    if sp.get("above_bound"):
        return (f"not shown: {sp['speedup']:.2f}× is above the {sp['bound']:.2f}× this acceptance allows "
                "(tokens per cloud call with free drafting), so the timing is off (other work on the machine)")
    if sp["verdict"] == "no measurable difference":
        return f"no measurable difference from cloud-only (spread {rng} covers 1.00×)"
    if sp["verdict"] == "faster":
        return f"{sp['speedup']:.2f}× faster than cloud-only ({rng})"
    return f"slower than cloud-only: {sp['speedup']:.2f}× its speed ({rng})"


def busy_words(sp: dict) -> str:
    return BUSY_WORDS.format(f=busy_factor(sp["decode_samples"], sp["cloud_samples"]))


def ordered(sps: list) -> list:
    """Two sides timed in one interleaving (A/B): one busy side, or verdicts that order the sides
    against their medians (the faster median 'no measurable difference', the slower 'faster'),
    make both busy: the page then says once that timing is not possible now."""
    rank = {"slower": 0, "no measurable difference": 1, "faster": 2}
    a, b = sps if len(sps) == 2 else (None, None)
    if not a or not b:
        return sps
    ra, rb = rank.get(a["verdict"], -9), rank.get(b["verdict"], 9)
    if "busy" in (a["verdict"], b["verdict"]) or (a["speedup"] - b["speedup"]) * (ra - rb) < 0:
        return [dict(x, verdict="busy") for x in sps]
    return sps
