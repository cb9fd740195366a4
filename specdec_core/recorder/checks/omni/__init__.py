"""Checks of the omni family (registered with recorder/checks/registry.py)."""
