"""Checks: one folder per family, each check registered with `registry.check`."""
