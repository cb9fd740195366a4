"""Checks of the tree family (registered with recorder/checks/registry.py)."""
