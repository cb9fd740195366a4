"""Checks of the chain family (registered with recorder/checks/registry.py)."""
