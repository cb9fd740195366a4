"""Normalize: each family of recordings made canonical before the rounds and checks (issue 41,
docs/recorder.md "Pipeline"): one module per assumption removed. `batch_rows`: a batch > 1
recording split into one single-row recording per row (padding, per-row cache lengths and
positions, slots a realignment moved)."""
