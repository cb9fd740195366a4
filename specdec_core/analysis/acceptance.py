"""One rule, two diagnoses: accepted drafts that the cloud ranked 2nd or lower.

The built-in decoder's diagnostics (`analysis.diagnostics.diagnose`) and the flight recorder
(`recorder.checks.check_lossless`, `recorder.analyze`) judge the accepted tokens of a trace
against the acceptance rule the user DECLARED: the knobs as set (`verify`, `rank_threshold`,
`temperature`). A fault is a bug in the code, not a declaration, so the built-in decoder's
trace carries the knobs as the user set them and nothing here reads `faults`: the finding comes
from the cloud ranks of the accepted tokens.

The declared rule allows a widest cloud rank, its *window* (`rank_window`):

    1     verify=greedy (greedy acceptance is argmax equality at any temperature),
          verify=sampling at temperature 0 (both distributions are one-hot),
          verify=rank with rank_threshold=1: the user asked for a lossless run
    R     verify=rank with rank_threshold R > 1: lossy by the user's choice (design.md, seed 000 C)
    None  verify=sampling at temperature > 0: min(1, p/q) accepts drafts of any rank and is
          lossless in distribution, so a rank >= 2 says nothing

Findings (severity chosen for what the user asked for):

    lossless_violation    error    window 1 and an accepted token ranked >= 2: the code does not
                                   do what was declared (rank acceptance in a loop that claims
                                   greedy, e.g. the `lenient_rank` fault); the output is not the
                                   cloud's greedy output. Same code and cause as the recorder's.
    rank_window_exceeded  error    window R > 1 and an accepted token ranked > R: the rule accepted
                                   more than the user allowed.
    lossy_accept          info     window R > 1, every accepted rank <= R, some >= 2: the knob
                                   doing what it says; the finding says how lossy the run was.
                          warning  the same, but a token outside the cloud's top-5 was accepted:
                                   the window is wide enough to give seed 000 C's incoherent tail
                                   (the range the knob's help and the seed000_fixed preset use is 3-5).

Every finding names how many tokens, at which positions (index among generated tokens), with
which cloud ranks, and where the text departs from the cloud's own greedy output: at the first
token the cloud did not rank 1st. When every token before the first low-rank acceptance was the
cloud's choice (rank 1) that is exactly where it departs; otherwise at the latest there.
"""
from __future__ import annotations

from collections import Counter

from specdec_core.findings import finding

DEFAULT_RANK_THRESHOLD = 5   # DecodeConfig.rank_threshold's default, for declarations without it
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
        return max(1, int(declared.get("rank_threshold") or DEFAULT_RANK_THRESHOLD))
    return 1


def _nth(r: int) -> str:
    return f"{r}{'th' if 10 <= r % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(r % 10, 'th')}"


def _get(t, key):
    return t.get(key) if isinstance(t, dict) else getattr(t, key, None)


def _ranks_words(ranks: list[int]) -> str:
    c = sorted(Counter(ranks).items())
    return ", ".join(f"rank {r} ×{n}" for r, n in c)


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
    """Findings on the accepted tokens of a trace (TokenRecords or their dicts) against the
    declared knobs (`verify`, `rank_threshold`, `temperature`); [] when there is nothing to say.
    Evidence as the recorder's: `index` among generated tokens, `position` in the sequence
    (prompt_len + index, when prompt_len is given)."""
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
           f"did not rank 1st ({_ranks_words(ranks)}): {listed}; {_departure(tokens, low[0])}")
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
