"""SpecScope engine: speculative decoding with a full trace. No Gradio in here."""
from specdec_core.decoding.config import DecodeConfig  # noqa: F401  (README: `from specdec_core import DecodeConfig`)
