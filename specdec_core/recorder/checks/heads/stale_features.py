"""The head drafter's blind check (issue 35): `stale_features` and what it costs, from what
recorder/observe/head_hooks.py kept (docs/recorder.md, "Head drafters")."""
from __future__ import annotations

from specdec_core.findings import finding
from specdec_core.recorder.checks.registry import check


def _first_drafts(t) -> list[tuple[bool, bool]]:
    """(the draft made was the committed token, the draft from the cloud's features was)."""
    pairs = []
    for f in t.fwds:
        fresh = (f.raw.get("features") or {}).get("fresh_next")
        n = len(f.ctx)
        if fresh is None or not f.rows or f.match < n or n >= len(t.C):
            continue
        pairs.append((f.rows["argmax"][-1] == t.C[n], fresh == t.C[n]))
    return pairs


@check("stale_features", order=160)
def check_stale_features(e) -> list:
    heads = [f for f in e.t.fwds if f.raw.get("features")]
    stale = sorted({q for f in heads for q in f.raw["features"]["stale"]})
    if not stale:
        return []
    checked = max(f.raw["features"]["checked"] for f in heads)
    worst = max(f.raw["features"]["max_dist"] for f in heads)
    pairs = _first_drafts(e.t)
    used = sum(a for a, _ in pairs) / max(1, len(pairs))
    right = sum(b for _, b in pairs) / max(1, len(pairs))
    cost = max(0.0, right - used)
    first = next(f for f in heads if f.raw["features"]["stale"])
    measured = (f"over {len(pairs)} rounds the first draft was accepted {used:.0%} of the time, "
                f"{right:.0%} with the cloud's features: the stale features cost {cost:.0%} "
                f"first-draft acceptance" if pairs else "what it costs was not measurable here")
    slots = max(f.raw["features"].get("other_slots", 0) for f in heads)
    cause = ("the head was fed the cloud's features of other tree slots than the accepted path's "
             f"({slots} position(s) hold another slot's feature: features taken by slot, not "
             "through the path's retrieve indices)" if slots else
             "after a verify the accepted tokens keep the head's approximated features (vllm #14649)")
    return [finding(
        "stale_features",
        f"head drafter reads stale features at {len(stale)} of {checked} checked positions",
        f"the head's KV entries for accepted tokens were computed from its own predicted features, "
        f"not the cloud's last hidden states at the same positions (cosine distance up to "
        f"{worst:.3f}, first at position {stale[0]}, head forward #{first.i}); {measured}",
        cause,
        "re-feed the accepted tokens to the head with the cloud's last hidden states of the "
        "accepted path from the verify forward (after a tree verify, gathered through the path's "
        "slots; crop the head's cache to the last position fed with cloud features)",
        evidence={"stale_positions": len(stale), "checked": checked, "first_position": stale[0],
                  "forward": first.i, "max_cosine_distance": worst, "rounds": len(pairs),
                  "first_draft_acceptance": round(used, 3),
                  "first_draft_acceptance_with_cloud_features": round(right, 3),
                  "acceptance_cost": round(cost, 3) if pairs else None, "other_slots": slots})]
