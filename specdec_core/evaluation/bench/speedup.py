"""Speed-ups measured honestly (issue 43): every side timed on quiet repeats interleaved with the
cloud-only decode, the speed-up given with its spread, and checked against the bound that the
measured acceptance allows. The spread is conservative: the slowest cloud-only repeat over the
fastest decode, and the fastest over the slowest; when it covers 1.0 the page says "no measurable
difference" instead of a number."""
from __future__ import annotations

import threading
from statistics import median

from specdec_core.evaluation.bench.stats import REPEATS, Stopped, busy_factor, interleaved_order, speedup, time_jobs  # noqa: F401

BUSY = 2.0      # a side whose quiet repeats vary by more than this factor: the machine is busy
BUSY_WORDS = ("timing not possible now: the repeats disagree (one decode's varied up to {f:.1f}×: the machine "
              "is busy); `python -m specdec_core bench` measures speed on a quiet machine")
CLOUD_OFF_WORDS = ("not shown: the cloud-only time both sides share is off (the other side would be above what "
                   "its acceptance allows), so no side is divided by it")


def _decode(backend, prompt, cfg, cancel):
    from specdec_core.decoding.decoder import SpeculativeDecoder

    tr = SpeculativeDecoder(backend, cfg, trace=False, dependence=False).run(prompt, cancel)
    if tr.ended_by in ("cancelled", "time_limit"):
        raise Stopped
    return (tr.metrics.get("time_split") or {}).get("total_s") or tr.metrics["wall_s"]


def time_interleaved(backend, sides: list[tuple[str, object, object]], n: int = REPEATS,
                     cancel: threading.Event | None = None) -> list[list[float]] | None:
    """Seconds of each side on `n` quiet repeats of stats.time_jobs: ("decode", cfg, prompt) its own
    time (time_split total), ("cloud_only", cfg, prompt) HF generate's wall time. None when
    cancelled or a decode hits its time limit."""
    from specdec_core.decoding.baseline import cloud_only

    cancel = cancel or threading.Event()
    run = {"cloud_only": lambda b, p, c: cloud_only(b, p, c)["wall_s"],
           "decode": lambda b, p, c: _decode(b, p, c, cancel)}
    jobs = {i: (lambda b, _, c, f=run[kind], p=prompt: f(b, p, c), cfg, float)
            for i, (kind, cfg, prompt) in enumerate(sides)}
    out = time_jobs(backend, [None], jobs, n, cancel=cancel)
    return None if out is None else [out[0][i] for i in range(len(sides))]


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
    x, lo, hi = speedup(cloud_s, decode_s)
    verdict = "no measurable difference" if lo <= 1.0 <= hi else ("faster" if lo > 1.0 else "slower")
    if busy_factor(decode_s, cloud_s) > BUSY:      # no verdict: one line says so (busy_words)
        verdict = "busy"
    b = bound(tokens, cloud_calls)
    return {"speedup": x, "lo": lo, "hi": hi, "decode_s": median(decode_s), "cloud_only_s": median(cloud_s),
            "decode_samples": list(decode_s), "cloud_samples": list(cloud_s), "repeats": len(decode_s),
            "verdict": verdict, "lossy": same_text is False, "bound": b,
            "above_bound": b is not None and x > b}


def speedup_words(sp: dict) -> str:
    """The one-line claim: '1.42× faster than cloud-only (1.30–1.55×)', 'no measurable
    difference from cloud-only (0.91–1.12×)', or for a lossy run 'speed of a different output'."""
    rng = f"{sp['lo']:.2f}–{sp['hi']:.2f}×"
    if sp.get("verdict") == "busy":
        return ("output differs from cloud-only; " if sp.get("lossy") else "") + busy_words(sp)
    if sp.get("cloud_off"):
        return CLOUD_OFF_WORDS
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
    make both busy: the page then says once that timing is not possible now. A side above its
    bound shows that the cloud-only time is off: a side divided by the same cloud-only time gets
    no ratio either (cloud_off; issue 58: A hidden as 'timing off', B shown '2.70× faster')."""
    rank = {"slower": 0, "no measurable difference": 1, "faster": 2}
    a, b = sps if len(sps) == 2 else (None, None)
    if not a or not b:
        return sps
    ra, rb = rank.get(a["verdict"], -9), rank.get(b["verdict"], 9)
    if "busy" in (a["verdict"], b["verdict"]) or (a["speedup"] - b["speedup"]) * (ra - rb) < 0:
        return [dict(x, verdict="busy") for x in sps]
    if a["cloud_samples"] == b["cloud_samples"] and (a["above_bound"] or b["above_bound"]):
        return [x if x["above_bound"] else dict(x, cloud_off=True) for x in sps]
    return sps
