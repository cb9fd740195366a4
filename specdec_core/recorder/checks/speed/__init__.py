"""Checks of the speed family (registered with recorder/checks/registry.py)."""
