"""Any pair of causal LMs sharing a tokenizer, with a text prompt (no audio)."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

from specdec_core.errors import BackendError, first_line
from specdec_core.backends.base import Backend, PromptInputs


HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # org/name, never an absolute path


def model_path(path, role: str) -> str:
    """`path` when it is a local folder or a hub id, else the one-line error (every backend)."""
    if not Path(path).exists() and not HUB_ID.match(str(path)):
        raise BackendError(f"{role} model not found: {path} (give a local folder or a hub id)")
    return str(path)


def hf_paths(options: dict) -> tuple[str, str]:
    """(edge, cloud) of the hf backend: --edge-model/--cloud-model, else SPECSCOPE_HF_EDGE/CLOUD."""
    edge = options.get("edge_model") or os.environ.get("SPECSCOPE_HF_EDGE")
    cloud = options.get("cloud_model") or os.environ.get("SPECSCOPE_HF_CLOUD")
    if not edge or not cloud:
        raise BackendError("the hf backend needs --edge-model DIR and --cloud-model DIR")
    return model_path(edge, "edge"), model_path(cloud, "cloud")


def config_dict(path: str, role: str) -> tuple[str, dict]:
    """(model_type, config dict) of a folder/hub id; a published Qwen2.5-Omni folder (the whole
    model) gives its thinker's config. One line when it cannot be read."""
    from transformers import PretrainedConfig

    try:
        cfg, _ = PretrainedConfig.get_config_dict(path)
    except Exception as e:  # noqa: BLE001 - any unreadable folder is the user's to fix
        raise BackendError(f"cannot read the {role} model config from {path}: {first_line(e)}") from None
    kind = cfg.get("model_type", "")
    return kind, (cfg.get("thinker_config") or {}) if kind == "qwen2_5_omni" else cfg


def chat_template(path: str) -> str | None:
    """The folder's own chat template file (chat_template.jinja, else .json), None without one."""
    for name in ("chat_template.jinja", "chat_template.json"):
        f = Path(path) / name
        if f.is_file():
            text = f.read_text(encoding="utf-8")
            return json.loads(text).get("chat_template") if name.endswith(".json") else text
    return None


def load_causal_lm(path: str, role: str, dtype=torch.float32, device="cpu", cls=AutoModelForCausalLM):
    """`cls`.from_pretrained (safetensors, no remote code) from a local folder (or a hub id when
    the user has a network): every backend's models (Omni: its thinker class)."""
    model_path(path, role)
    kw = dict(dtype=dtype, use_safetensors=True, trust_remote_code=False)
    try:
        if torch.device(device).type == "cuda":
            try:  # straight onto the GPU: no 18 GB staging copy in host memory
                return cls.from_pretrained(path, device_map={"": str(device)}, **kw).eval()
            except (ImportError, ValueError) as e:
                if "accelerate" not in str(e).lower():
                    raise
        model = cls.from_pretrained(path, **kw)
    except Exception as e:  # loading errors from a user-named path are user errors
        raise BackendError(f"cannot load {role} model from {path}: {first_line(e)}") from None
    return model.to(device).eval()


def load_tokenizer(path: str, role: str = "cloud"):
    """AutoTokenizer, except for plain tokenizers-library vocabularies saved next to a Qwen2
    config: transformers 5 then builds Qwen2Tokenizer's byte-level pipeline over them, which
    silently encodes Chinese characters to nothing. One line when it cannot be loaded."""
    cfg_file = Path(path) / "tokenizer_config.json"
    try:
        if cfg_file.exists() and (Path(path) / "tokenizer.json").exists():
            cls = json.loads(cfg_file.read_text(encoding="utf-8")).get("tokenizer_class")
            if cls in ("TokenizersBackend", "PreTrainedTokenizerFast"):
                return PreTrainedTokenizerFast.from_pretrained(path)
        return AutoTokenizer.from_pretrained(path)
    except Exception as e:  # noqa: BLE001 - a user-named folder's tokenizer
        raise BackendError(f"cannot load the {role} tokenizer from {path}: {first_line(e)}") from None


class HFBackend(Backend):
    name = "hf"
    needs_audio = False

    def __init__(self, edge_path: str, cloud_path: str, prompt: str = "", dtype=None):
        self.edge = load_causal_lm(edge_path, "edge", dtype or torch.float32)
        self.cloud = load_causal_lm(cloud_path, "cloud", dtype or torch.float32)
        self.dtype = next(self.cloud.parameters()).dtype
        self.tokenizer = tokenizer = load_tokenizer(cloud_path)
        self.prompt = prompt
        eos = self.cloud.generation_config.eos_token_id or tokenizer.eos_token_id
        self.stop_ids = sorted({eos} if isinstance(eos, int) else set(eos or []))
        self.shared_vocab = self.head_rows()

    def build_inputs(self, audio, prompt_type: str, prompt: str | None = None) -> PromptInputs:
        text = prompt if prompt is not None else self.prompt
        ids = self.tokenizer(text, return_tensors="pt").input_ids
        if ids.shape[1] == 0:
            raise BackendError("the hf backend needs a non-empty --prompt")
        return PromptInputs(ids, info={"prompt": text})
