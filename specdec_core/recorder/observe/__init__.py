"""Observe: the hooks that record what each forward was fed and scored (one protocol per family)."""
