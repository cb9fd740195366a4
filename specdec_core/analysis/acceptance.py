"""One rule, two diagnoses: accepted drafts that the cloud ranked 2nd or lower, judged against the
acceptance rule the user DECLARED (`verify`, `rank_threshold`, `temperature`), never `faults`.
`rank_window` is the widest cloud rank that rule allows: 1 lossless, R for verify=rank with
rank_threshold R > 1, None for verify=sampling at T > 0 (any rank can be accepted)."""
from __future__ import annotations

from collections import Counter

from specdec_core.analysis.audio_dependence import _get
from specdec_core.decoding.config import KNOBS
from specdec_core.findings import finding

TOP = 5                      # beyond the cloud's top-5: the seed's incoherent-tail range
SHOWN = 10                   # positions listed in the detail


def not_greedy_cause(rank) -> str:
    """The cause of an accepted low-rank draft under a lossless declaration (both diagnoses)."""
    return (f"a draft the cloud ranks {rank or '>5'} was accepted: the acceptance rule is not "
            "greedy equality" + (" (a rank window / threshold)" if rank and rank <= TOP else
                                 " (a draft outside the cloud's top-5 passed)"))


NOT_GREEDY_FIX = "accept a draft only if it equals the cloud's argmax (or use rejection sampling)"


def rank_window(declared: dict) -> int | None:
    """The widest cloud rank the declared rule may accept (module docstring); None = any."""
    verify = declared.get("verify") or "greedy"
    temperature = float(declared.get("temperature") or 0)
    if verify == "sampling":
        return None if temperature > 0 else 1
    if verify == "rank":
        return max(1, int(declared.get("rank_threshold") or KNOBS["rank_threshold"].default))
    return 1


def _nth(r: int) -> str:
    return f"{r}{'th' if 10 <= r % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(r % 10, 'th')}"


def _departure(tokens, t_low) -> str:
    """Where the committed text leaves the cloud's greedy output (module docstring)."""
    first = next(t for t in tokens if _get(t, "target_rank") != 1)
    i = _get(first, "i")
    head = f"token {_get(t_low, 'i')} {_get(t_low, 'text')!r} (cloud rank {_get(t_low, 'target_rank')})"
    if first is t_low:
        return f"the text departs from the cloud's own greedy output at {head}"
    why = ("was never verified" if _get(first, "target_rank") is None
           else f"is the cloud's rank {_get(first, 'target_rank')}")
    return (f"the text departs from the cloud's own greedy output at {head} at the latest "
            f"(token {i} {_get(first, 'text')!r} before it {why})")


def rank_findings(tokens, declared: dict, prompt_len: int | None = None) -> list[dict]:
    """Findings on the accepted tokens of a trace against the declared knobs; [] when there is nothing
    to say. Evidence as the recorder's: `index` among generated tokens, `position` = prompt_len + index."""
    window = rank_window(declared)
    if window is None:
        return []
    tokens = list(tokens)
    low = [t for t in tokens if _get(t, "source") == "accepted" and (_get(t, "target_rank") or 1) >= 2]
    if not low:
        return []
    pos = [_get(t, "i") for t in low]
    ranks = [_get(t, "target_rank") for t in low]
    worst, n, total = max(ranks), len(low), len(tokens)
    listed = ", ".join(f"{_get(t, 'i')} {_get(t, 'text')!r} (rank {_get(t, 'target_rank')})"
                       for t in low[:SHOWN]) + (f", … {n - SHOWN} more" if n > SHOWN else "")
    how = (f"{n} of {total} committed tokens ({n / max(total, 1):.0%}) are accepted drafts the cloud "
           f"did not rank 1st ({', '.join(f'rank {r} ×{c}' for r, c in sorted(Counter(ranks).items()))}): "
           f"{listed}; {_departure(tokens, low[0])}")
    ev = {"model": "cloud", "forward": None, "tokens": None,
          "position": None if prompt_len is None else prompt_len + pos[0], "index": pos[0],
          "rank": ranks[0], "positions": pos, "ranks": ranks, "n_positions": n,
          "worst_rank": worst, "window": window}
    verify = declared.get("verify") or "greedy"
    if window == 1:
        said = f"verify={verify}" + (" with rank_threshold=1" if verify == "rank" else "")
        return [finding(
            "lossless_violation", f"output is not the cloud's greedy choice: {n} accepted draft(s) the cloud ranked "
            f"2nd or lower (worst {worst})",
            f"{said} declares lossless acceptance (rank 1 only), yet {how}",
            not_greedy_cause(ranks[0]), NOT_GREEDY_FIX, ev)]
    over = [(p, r) for p, r in zip(pos, ranks) if r > window]
    if over:
        return [finding(
            "rank_window_exceeded", f"{len(over)} accepted draft(s) ranked beyond the declared window "
            f"rank_threshold={window} (worst {worst})",
            f"first at token {over[0][0]} (cloud rank {over[0][1]}); {how}",
            f"the acceptance rule in the code is looser than rank <= rank_threshold={window} "
            "(a different threshold than the one declared, or an off-by-one in the rank test)",
            f"accept a draft only while its cloud rank is <= rank_threshold ({window})", ev)]
    wide = worst > TOP
    if wide:
        cause = ("verify=rank accepts any draft the cloud ranks within rank_threshold; a window this "
                 "wide accepts tokens the cloud barely considers (seed 000 C's incoherent tail)")
        fix = f"rank_threshold 3-{TOP}, or verify=greedy for the cloud's own output"
    else:
        cause = ("verify=rank accepts any draft the cloud ranks within rank_threshold: lossy by "
                 "design, the user's choice of fewer corrections for some drift")
        fix = "a lower rank_threshold for less drift, or verify=greedy for the cloud's own output"
    return [finding(
        "lossy_accept", f"lossy by choice: {n} accepted draft(s) the cloud ranked "
        f"{'2nd' if worst == 2 else '2nd to ' + _nth(worst)} "
        f"(verify=rank, rank_threshold={window})",
        how + "; the output is therefore not the cloud's greedy output"
        + (f", and tokens outside the cloud's top-{TOP} were accepted" if wide else ""),
        cause, fix, ev, severity="warning" if wide else "info")]
