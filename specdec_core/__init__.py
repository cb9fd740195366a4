"""SpecScope engine: speculative decoding with a full trace. No Gradio in here."""
from specdec_core.decoding.config import DecodeConfig, ConfigError  # noqa: F401
from specdec_core.errors import UserError  # noqa: F401
