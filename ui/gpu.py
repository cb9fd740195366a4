"""`spaces.GPU` on a Hugging Face ZeroGPU Space, a no-op everywhere else."""
from __future__ import annotations

try:  # the `spaces` package exists only on Hugging Face Spaces
    import spaces

    def gpu(fn):
        return spaces.GPU(duration=120)(fn)
except ImportError:
    def gpu(fn):
        return fn
