"""Checks of the heads family (registered with recorder/checks/registry.py)."""
