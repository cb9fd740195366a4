"""Checks read in the trace: the output text and the declared task (analysis/diagnostics.py)."""
