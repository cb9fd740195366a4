"""The flight recorder: record a user's own speculative decoder (two HF models) and diagnose
it blind. `Recorder` (hooks) -> recording dict -> `analyze` (trace + findings)."""
from specdec_core.recorder.analyze import analyze  # noqa: F401
from specdec_core.recorder.observe.hooks import SCHEMA, Recorder  # noqa: F401
