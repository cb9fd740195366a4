"""scripts/make_samples.py loaded as a module (it is a script, not part of the package)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_make_samples():
    spec = importlib.util.spec_from_file_location("make_samples", ROOT / "scripts" / "make_samples.py")
    ms = importlib.util.module_from_spec(spec)
    sys.modules["make_samples"] = ms  # dataclasses look their module up while building
    try:
        spec.loader.exec_module(ms)
    finally:
        del sys.modules["make_samples"]
    return ms
