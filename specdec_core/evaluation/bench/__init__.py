"""Bench room: the one timing loop, spread and speed-up formula (stats.py), bench and its
sweeps, the cost model, the page's speed verdicts (speedup.py)."""
