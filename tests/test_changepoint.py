"""The one change-point rule for "acceptance dies past a position" (analysis/changepoint.py), used
by the recorder's acceptance_collapse and the served-engine audit: on issue 57's case (three
clips pooled by context, a two-step dip at 62-63 that recovers, then nothing accepted from 75
on with a drafter window of 80 and k = 4) it says 75, not 62, and the window's arithmetic."""
from __future__ import annotations

from specdec_core.analysis.changepoint import change_point, window_arithmetic
from specdec_core.audit import checks
from specdec_core.findings import from_json

K, WINDOW, CLIFF = 4, 80, 75
# (context, accepted, drafted) pooled over three clips: 3/12, 12/12, 0/12, 1/12, 8/8, 3/4, 9/12,
# 3/4, 3/8 up to context 74, then 0 of every step's 12 drafts at every context from 75 on
BEFORE = [(54, 3, 12), (57, 12, 12), (62, 0, 12), (63, 1, 12), (66, 8, 8), (68, 3, 4), (70, 9, 12),
          (72, 3, 4), (74, 3, 8)]
ROWS = [{"context": c, "accepted": a, "drafted": d} for c, a, d in BEFORE] + \
       [{"context": c, "accepted": 0, "drafted": 4} for c in range(CLIFF, CLIFF + 32) for _ in range(3)]


def test_the_dip_then_cliff_is_placed_where_acceptance_stays_fallen():
    cp = change_point([(x["context"], x["drafted"], x["accepted"]) for x in ROWS], 3, 3)
    assert cp is not None and abs(cp["position"] - CLIFF) <= K and cp["position"] != 62, cp
    assert cp["position"] == CLIFF and cp["rate_after"] == 0.0 and cp["rate_before"] == 0.5
    assert cp["drafts_wasted"] == 32 * 12 and cp["steps_before"] == len(BEFORE)


def test_a_dip_that_recovers_is_no_collapse():
    steps = [(c, d, a) for c, a, d in BEFORE] + [(c, 4, 3) for c in range(75, 100)]
    assert change_point(steps, 3, 3) is None
    assert change_point([(c, 4, 0) for c in range(40)], 3, 3) is None    # low throughout: no position


def test_a_collapse_from_the_first_step_needs_its_first_steps_dead():
    """min_before 0 (loops and engines alike): position 0 only when the first min_after steps
    accept nothing; a drafter that is merely low from the start has no fall to place."""
    dead = [(c, 4, 0) for c in range(40)]
    cp = change_point(dead, 0, 6)
    assert cp["position"] == 0 and cp["index"] == 0 and cp["rate_before"] is None and cp["rate_after"] == 0.0
    low = [(c, 4, 1 if c == 3 else 0) for c in range(40)]     # one accepted draft in the first 6
    assert change_point(low, 0, 6) is None
    assert change_point(low[6:], 0, 6)["position"] == 6       # the same tail, its first 6 dead
    assert change_point(dead, 1, 6) is None                   # min_before 1: never position 0


def test_the_audit_names_the_window_and_its_arithmetic():
    f = checks.collapse(ROWS, WINDOW, K)[0]
    ev = f["evidence"]
    assert f["code"] == "acceptance_collapse" and ev["alias"] == "acceptance_cliff"
    assert ev["position"] == CLIFF and ev["window_arithmetic"] == "80 - 4 - 1 = 75"
    assert "max_position_embeddings 80" in f["title"] and "80 - 4 - 1 = 75" in f["title"]
    plain = checks.collapse(ROWS)[0]
    assert plain["evidence"]["window_arithmetic"] is None and "max_position_embeddings" not in plain["title"]
    assert window_arithmetic(62, WINDOW, K) is None       # a window that does not explain it is not named
    # the old code name is still read from a file (one release)
    assert from_json({"code": "acceptance_cliff", "severity": "warning"})["code"] == "acceptance_collapse"
