"""The live-trace fold moved into the engine, next to the events it folds."""
from specdec_core.decoding.live import LiveTrace  # noqa: F401
