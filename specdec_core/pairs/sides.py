"""One side of a pair (edge or cloud) as the checks see it: the folder's own config, tokenizer,
feature extractor, generation config and chat template, read without weights; each side loads
its OWN tokenizer/processor files (a loaded backend shares the cloud's), so a mismatch shows."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Side:
    role: str                        # "edge" | "cloud"
    path: str
    config: dict                     # the text (language-model) config
    tokenizer: object
    model_type: str = ""
    audio_config: dict | None = None
    feature_extractor: dict | None = None
    generation: dict = field(default_factory=dict)
    chat_template: str | None = None

    @property
    def head_width(self) -> int | None:
        return self.config.get("vocab_size")

    @property
    def dtype(self) -> str | None:
        return self.config.get("dtype") or self.config.get("torch_dtype")


def _json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, ValueError):
        return None


def _configs(path: str, role: str) -> tuple[str, dict, dict | None]:
    """(model_type, text config, audio config) of a folder/hub id."""
    from specdec_core.backends.hf import config_dict

    kind, cfg = config_dict(path, role)
    text = dict(cfg.get("text_config") or cfg)
    for k in ("dtype", "torch_dtype"):          # the dtype often sits on the outer config only
        if k in cfg and k not in text:
            text[k] = cfg[k]
    return kind, text, cfg.get("audio_config")


def _feature_extractor(path: str) -> dict | None:
    local = Path(path)
    if local.is_dir():
        return _json(local / "preprocessor_config.json")
    try:
        from transformers.feature_extraction_utils import FeatureExtractionMixin

        return FeatureExtractionMixin.get_feature_extractor_dict(path)[0]
    except Exception:  # noqa: BLE001 - a text model has none
        return None


def load_side(path: str, role: str) -> Side:
    from specdec_core.backends.hf import chat_template, load_tokenizer

    path = str(path)
    kind, text, audio = _configs(path, role)
    tok = load_tokenizer(path, role)
    gen = _json(Path(path) / "generation_config.json") or {}
    return Side(role=role, path=path, config=text, tokenizer=tok, model_type=kind,
                audio_config=audio, feature_extractor=_feature_extractor(path), generation=gen,
                chat_template=chat_template(path) or getattr(tok, "chat_template", None))


def backend_paths(name: str, options: dict) -> tuple[str, str]:
    """(edge folder, cloud folder) the backend `name` would load with these options."""
    from specdec_core.backends.registry import entry

    return entry(name).paths(options)

