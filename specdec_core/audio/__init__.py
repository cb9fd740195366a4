"""The audio front end: loading/validation, prosody features, condition tokens."""
from specdec_core.audio.loading import Audio, AudioError, load_audio  # noqa: F401
