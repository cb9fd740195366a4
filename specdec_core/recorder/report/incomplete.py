"""A recording whose forwards stop before its output does (issue 43): a JSON file cut short, hooks
removed before the loop ended, a decode that crashed after `out_ids` was saved. Ids past every
fed and every predicted id were never seen by a recorded forward; the run is then named
incomplete, and what the checks say about the cut is nested under it."""
from __future__ import annotations

from specdec_core.findings import fact, finding
from specdec_core.recorder.evidence.tape import Tapes

# a loop may append one id no model produced (an end marker of its own: vocab_mismatch.py)
SLACK = 1


def seen_until(t: Tapes) -> int:
    """The first position of prompt + output that no recorded forward was fed or predicted."""
    end = 0
    for f in t.fwds:
        if f.ctx is not None:
            end = max(end, len(f.ctx))
        if f.rows:
            end = max(end, f.first_q + len(f.rows["argmax"]) + 1)
    return end


def check_incomplete(t: Tapes) -> list[dict]:
    cut = seen_until(t)
    missing = len(t.C) - max(cut, t.P)
    if not t.out or missing <= SLACK:
        return []
    i = max(cut, t.P) - t.P
    return [finding(
        "incomplete_recording",
        f"incomplete recording: the forwards stop at output index {i} of {len(t.out)}",
        f"the last {missing} of {len(t.out)} output ids were never fed to or scored by a recorded "
        f"forward ({len(t.fwds)} forwards recorded); nothing after index {i} can be judged",
        "the recording was cut short (a file truncated or edited, the Recorder left before the "
        "loop ended, rec.finish(out) called with the ids of another run)",
        "record the whole decode again: call rec.finish(out_ids) after your loop returns, and "
        "save the file in one piece",
        {"model": None, "forward": None, "position": max(cut, t.P), "tokens": t.C[max(cut, t.P):][:8],
         "missing": missing, "forwards": len(t.fwds)})]


def nest(found: list, inc: list) -> list:
    """The incomplete finding first; what happens at or after the cut, and the end checks,
    nested under it (explained_by)."""
    if not inc:
        return found
    cut = inc[0]["evidence"]["position"]
    # an error before the cut (ids fed twice, a wrong context) also leaves output ids no forward
    # saw: the tail is that defect's, and the recording is not called cut short on its own
    early = next((f for f in found if f["severity"] == "error" and not f.get("explained_by")
                  and not fact(f["code"], "end")
                  and isinstance((f.get("evidence") or {}).get("position"), int)
                  and f["evidence"]["position"] < cut - 1), None)
    if early is not None:
        return found + [dict(inc[0], explained_by=early["code"])]
    for f in found:
        pos = (f.get("evidence") or {}).get("position")
        if not f.get("explained_by") and (fact(f["code"], "end") or (isinstance(pos, int) and pos >= cut - 1)):
            f["explained_by"] = "incomplete_recording"
    return inc + found


def end_not_judged(found: list, ended_by: str) -> list:
    """A run the user stopped (or the time limit cut) is not judged on its end (issue 50): the
    end checks' findings, and the symptoms they explain, give way to one not_judged line."""
    gone = {f["code"] for f in found if fact(f["code"], "end")}
    kept = [f for f in found if f["code"] not in gone and f.get("explained_by") not in gone]
    why = "the Stop button" if ended_by == "cancelled" else "the time limit (time_limit_s)"
    return kept + [finding("not_judged", f"the run's end is not judged: it was ended by {why}",
                           "where and how the run ended is the user's stop, not the decoder's: the "
                           "end checks (unverified end, missed stop, length) are skipped",
                           "", "", {"model": None, "forward": None, "ended_by": ended_by})]
