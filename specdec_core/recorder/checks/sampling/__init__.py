"""Checks of the sampling family (registered with recorder/checks/registry.py)."""
