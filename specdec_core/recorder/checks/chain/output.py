"""Blind checks of the output: is it the cloud's greedy choice (check_lossless), did it stop
where the stop ids say and end on verified tokens (check_stops). Causes from the evidence
(recorder/checks/chain/causes.py)."""
from __future__ import annotations

from specdec_core.analysis.acceptance import NOT_GREEDY_FIX, not_greedy_cause, rank_findings
from specdec_core.recorder.checks.chain import causes
from specdec_core.findings import finding
from specdec_core.recorder.checks.registry import check, ev


@check("lossless_violation", "rank_window_exceeded", "context_mismatch", scope="row", order=70)
def check_lossless(e) -> list[dict]:
    t, rounds, declared, texts = e.t, e.rounds, e.declared, e.texts
    greedy = declared.get("verify", "greedy") == "greedy" and not declared.get("temperature")
    C, bad = t.C, t.not_argmax() if greedy else []
    if not bad:
        return []
    p, f, r = bad[0]
    tok, best = C[p], f.rows["argmax"][r]
    rank = f.rank_of(r, tok)
    ranks = [fw_.rank_of(r_, C[p_]) for p_, fw_, r_ in bad]
    i, k = p - t.P, int(declared.get("k") or 8)
    dup = next((m for m in range(1, k + 2) if p - m >= t.P and C[p - m:p] == C[p:p + m]), None)
    if dup:
        cause = (f"the committed tokens from index {i} repeat the {dup} token(s) just before them: "
                 "a block was appended to the sequence twice (or a bonus duplicated)")
        fix = "append each verified token once, from one committed sequence"
    elif all(q in causes.accepted_drafts(rounds) for q, _, _ in bad):
        cause, fix = not_greedy_cause(rank), NOT_GREEDY_FIX   # the built-in diagnosis's words
    else:
        cause = causes.not_greedy(bad, t, rounds)
        fix = (NOT_GREEDY_FIX if "accepted draft" in cause
               else "commit only accepted drafts and the cloud's correction/bonus")
    # a block appended twice: the models then read a sequence the cloud never decided (the
    # input is corrupted), a context bug rather than a loose acceptance test
    code = "context_mismatch" if dup else "lossless_violation"
    return [finding(
        code, f"output is not the cloud's greedy choice at {len(bad)} position(s)"
        + (" (a block appended twice)" if dup else ""),
        f"first at index {i}: committed {texts(tok)!r} (id {tok}, cloud rank {rank or '>5'}), the "
        f"cloud chose {texts(best)!r} (id {best}); worst rank {max((x or 6) for x in ranks)}",
        cause, fix, ev(f, p, {"committed": tok, "cloud": best}, index=i, rank=rank,
                        n_positions=len(bad)), severity="error")]


@check("missed_eos", "unverified_end", scope="row", order=80)
def check_stops(e) -> list[dict]:
    t, rec, texts, rounds = e.t, e.rec, e.texts, e.rounds
    out, stops, d = [], set(rec.get("stop_ids") or []), rec.get("declared", {})
    gen = t.out
    i = next((i for i, x in enumerate(gen[:-1]) if x in stops), None)
    if i is not None:
        rnd = next((r for r in rounds if r.start <= t.P + i < r.end), None)
        inside = rnd is not None and t.P + i < rnd.end - 1
        why = ("the stop id was committed inside a round's accepted block and the stop was "
               "checked only on the round's last token" if inside else
               "the stop id was the last token of its round and decoding still went on: the "
               "stop was not checked by id (e.g. on text decoded with special tokens skipped)")
        out.append(finding(
            "missed_eos", f"stop id {texts(gen[i])!r} at index {i} and decoding went on",
            f"{len(gen) - i - 1} tokens were generated after it",
            why,
            "after committing each token, stop if its id is in stop_ids",
            ev(None, t.P + i, [gen[i]], index=i)))
    # a declared entropy gate lets confident blocks through unverified, the end included
    # (a cloud whose logits were never seen verified nothing visible: not_judged says so)
    used_cloud = any(f.model == "cloud" and f.rows for f in t.fwds) and d.get("entropy_threshold") is None
    tail = next((len(t.C) - 1 - p for p in range(len(t.C) - 1, t.P - 1, -1) if p in t.decided), len(gen))
    sent = set(d.get("sentence_ids") or [])
    max_new = d.get("max_new_tokens")
    stopped_early = (gen and gen[-1] not in stops and not (gen[-1] in sent and len(gen) >= d.get("min_new_tokens", 0))
                     and (max_new is None or len(gen) < max_new)
                     and i is None)   # it reached a stop id: what follows is missed_eos's
    never = bool(tail and used_cloud)
    if never or stopped_early:
        parts = ([f"the last {tail} token(s) were never scored by the cloud"] if never else []) + (
            [f"the run stopped on {texts(gen[-1])!r} (not a stop id) after {len(gen)} of "
             f"{max_new or '?'} tokens"] if stopped_early else [])
        out.append(finding(
            "unverified_end", "the run ended on tokens the cloud never verified"
            if never else "the run stopped early on a non-stop token",
            "; ".join(parts),
            causes.unverified(t, tail if used_cloud else 0, gen, texts),
            "stop on token ids only, after verification", ev(None, len(t.C) - 1, gen[-tail:] if tail else gen[-1:],
                                                             unverified=tail)))
    return out


@check("rank_window_exceeded", "lossy_accept", "lossless_violation", scope="row", order=60)
def rank_window(e) -> list:
    """Accepted drafts the cloud ranks 2nd or lower against the declared window (greedy: 1),
    the built-in decoder's rule (acceptance.py); before check_lossless, whose finding of the
    same code then joins this one (report/roots.merge_repeats)."""
    return [] if e.declared.get("temperature") else rank_findings(e.trace.tokens, e.declared, e.t.P)
