"""Reproduce the shipped demo models: see specdec_core/demo/train.py."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specdec_core.demo.train import main  # noqa: E402

if __name__ == "__main__":
    main()
