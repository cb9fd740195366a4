"""Where a recorded decoder's time goes (edge and cloud forwards, the hooks, the user's loop; per
round and between steps), and the findings `loop_overhead` and `recomputed_context`, from
measurements only (docs/recorder.md, "Where the time goes")."""
from __future__ import annotations

from specdec_core.findings import finding
from specdec_core.recorder.checks.registry import check, ev
from specdec_core.recorder.evidence.timing import _end, _time, recording_split, wall_of

# loop_overhead: share of the wall outside the forwards; recomputed_context: share of the
# forwards' time spent on positions already computed for the same context. Both thresholds and
# what they were measured on: docs/recorder.md, "Where the time goes".
OVERHEAD_SHARE = 0.35
RECOMPUTE_SHARE = 0.25
GAP_KINDS = {"start": "before the first forward (setup)",
             "draft": "between draft steps (per drafted token)",
             "to_verify": "between drafting and the cloud's forward",
             "after_verify": "after the cloud's forward (accept, commit, roll back, next round)",
             "end": "after the last forward (finishing)"}


def gaps(rec: dict) -> dict:
    """Seconds of the user's own time (hooks excluded) outside the forwards, by where they sit
    (GAP_KINDS), with how many gaps of each kind."""
    fw = [f for f in rec.get("forwards") or [] if _time(f)]
    out = {k: [0.0, 0] for k in GAP_KINDS}
    if not fw:
        return out
    prev_end, prev = 0.0, None
    for f in fw:
        tm = _time(f)
        gap = tm["t"] - (tm["pre"] or 0.0) - prev_end
        kind = ("start" if prev is None else "after_verify" if prev["model"] == "cloud"
                else "draft" if f["model"] == "edge" else "to_verify")
        out[kind][0] += max(gap, 0.0)
        out[kind][1] += 1
        prev_end, prev = _end(tm), f
    out["end"] = [max(wall_of(rec) - prev_end, 0.0), 1]
    return out


def recomputed(t) -> dict:
    """Per model: positions fed, and positions fed that the same model had computed before for
    the same context (compared with its previous forward's context: a cached loop feeds only
    what its cache does not hold; a loop without a cache, or one that re-runs the prompt, feeds
    the shared prefix again)."""
    out = {m: {"fed": 0, "again": 0, "forwards": 0, "time_s": 0.0} for m in ("edge", "cloud")}
    prev: dict = {}
    for f in t.fwds:
        n = f.n
        o = out[f.model]
        o["fed"] += n
        p = prev.get(f.model)
        if p is not None and n:
            same = next((j for j, (a, b) in enumerate(zip(p.ctx, f.ctx)) if a is None or a != b),
                        min(len(p.ctx), len(f.ctx)))
            again = max(0, min(same, f.L + n) - f.L)
            if again:
                o["again"] += again
                o["forwards"] += 1
                tm = _time(f.raw)
                if tm:
                    o["time_s"] += tm["dur"] * again / n
        prev[f.model] = f
    return out


@check("loop_overhead", "recomputed_context", order=120)
def check_speed(e) -> list[dict]:
    """The loop's own time: a user's loop only (the built-in decoder's time split is shown on
    the page; its Python overhead on a tiny pair, trees most, is not the user's bug)."""
    rec, t = e.rec, e.t
    if rec.get("builtin"):
        return []
    found = []
    split = recording_split(rec)
    if split and split["other_share"] is not None and split["other_share"] > OVERHEAD_SHARE:
        g = gaps(rec)
        own = split["total_s"] - split.get("recorder_s", 0.0)
        kind = max(g, key=lambda k: g[k][0])
        secs, count = g[kind]
        where = ", ".join(f"{GAP_KINDS[k].split(' (')[0]} {v[0] / own:.0%}"
                          for k, v in sorted(g.items(), key=lambda kv: -kv[1][0]) if v[0] / own >= 0.01)
        per = f" ({secs / count * 1e3:.2f} ms each over {count})" if count > 1 else ""
        found.append(finding(
            "loop_overhead", f"{split['other_share']:.0%} of the decode is outside the models' forwards",
            f"{split['other_s']:.3f} s of {own:.3f} s is the loop's own time (edge forwards "
            f"{split['edge_s']:.3f} s, cloud forwards {split['cloud_s']:.3f} s); most of it "
            f"{GAP_KINDS[kind]}{per}. By place: {where}",
            "Python work between the forwards that grows with the text or runs every token: "
            "decoding the whole text to check stops, rebuilding tensors or lists from the full "
            "sequence, converting full logits to Python, printing",
            "stop on token ids, keep the sequence as a list and append, decode text once at the "
            "end (or only the new token); profile the place named above",
            ev(other_share=split["other_share"], other_s=split["other_s"],
               gaps={k: {"s": round(v[0], 6), "n": v[1]} for k, v in g.items()})))
    rc = recomputed(t)
    fed = sum(v["fed"] for v in rc.values())
    again = sum(v["again"] for v in rc.values())
    wasted = sum(v["time_s"] for v in rc.values())
    fwd = (split["edge_s"] + split["cloud_s"]) if split else 0.0
    # timed: the share of the forwards' time spent on recomputed positions (a forward's time
    # split over its positions); untimed recordings: the share of positions
    share = wasted / fwd if fwd > 0 else (again / fed if fed else 0.0)
    if again and share >= RECOMPUTE_SHARE:
        worst = max(rc, key=lambda m: rc[m]["again"])
        what = (f"about {share:.0%} of the forward time ({wasted:.3f} of {fwd:.3f} s)" if fwd > 0
                else f"{share:.0%} of the positions fed")
        found.append(finding(
            "recomputed_context", f"{what} recomputes context the models had already computed",
            f"{again} of {fed} positions fed (edge {rc['edge']['again']} of {rc['edge']['fed']}, "
            f"cloud {rc['cloud']['again']} of {rc['cloud']['fed']}) repeat the same model's "
            f"previous context; {rc[worst]['forwards']} {worst} forwards re-feed a prefix it had "
            f"already computed",
            "the prompt (or the whole sequence) is run again instead of continuing a KV cache: "
            "use_cache=False, a new cache every round, or the full sequence fed at cache length 0",
            "keep one KV cache per model across rounds, feed only what it has not seen, and "
            "crop it after a rejection instead of rebuilding it",
            ev(model=worst, recomputed=rc, share=round(share, 4),
               positions_share=round(again / fed, 4) if fed else None)))
    return found
