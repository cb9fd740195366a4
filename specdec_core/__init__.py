"""SpecScope engine: speculative decoding with a full trace. No Gradio in here."""
from .config import DecodeConfig, ConfigError  # noqa: F401
from .errors import UserError  # noqa: F401
