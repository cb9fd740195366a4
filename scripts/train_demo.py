"""Reproduce the shipped demo models: see devtools/train_demo.py."""
import os
import sys
from pathlib import Path

# Passive OpenMP waits: on a shared 2-core machine, spinning threads make every step wait for
# a descheduled peer. Must be set before torch loads; it changes no arithmetic.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devtools.train_demo import main  # noqa: E402

if __name__ == "__main__":
    main()
