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


def load_causal_lm(path: str, role: str, dtype=torch.float32, device: str = "cpu"):
    """from_pretrained from a local folder (or a hub id when the user has a network)."""
    model_path(path, role)
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, trust_remote_code=False,
                                                     use_safetensors=True)
    except Exception as e:  # loading errors from a user-named path are user errors
        raise BackendError(f"cannot load {role} model from {path}: {first_line(e)}") from None
    return model.to(device).eval()


def load_tokenizer(path: str):
    """AutoTokenizer, except for plain tokenizers-library vocabularies saved next to a Qwen2
    config: transformers 5 then builds Qwen2Tokenizer's byte-level pipeline over them, which
    silently encodes Chinese characters to nothing."""
    cfg_file = Path(path) / "tokenizer_config.json"
    if cfg_file.exists() and (Path(path) / "tokenizer.json").exists():
        cls = json.loads(cfg_file.read_text(encoding="utf-8")).get("tokenizer_class")
        if cls in ("TokenizersBackend", "PreTrainedTokenizerFast"):
            return PreTrainedTokenizerFast.from_pretrained(path)
    return AutoTokenizer.from_pretrained(path)


class HFBackend(Backend):
    name = "hf"
    needs_audio = False

    def __init__(self, edge_path: str, cloud_path: str, prompt: str = "", edge=None, cloud=None,
                 tokenizer=None, dtype=None):
        dtype = dtype or torch.float32
        self.edge = edge if edge is not None else load_causal_lm(edge_path, "edge", dtype)
        self.cloud = cloud if cloud is not None else load_causal_lm(cloud_path, "cloud", dtype)
        self.dtype = next(self.cloud.parameters()).dtype
        if tokenizer is None:
            try:
                tokenizer = load_tokenizer(cloud_path)
            except Exception as e:
                raise BackendError(f"cannot load tokenizer from {cloud_path}: {first_line(e)}") from None
        self.tokenizer = tokenizer
        self.prompt = prompt
        eos = self.cloud.generation_config.eos_token_id or tokenizer.eos_token_id
        self.stop_ids = sorted({eos} if isinstance(eos, int) else set(eos or []))
        ve = self.edge.get_output_embeddings().weight.shape[0]
        vc = self.cloud.get_output_embeddings().weight.shape[0]
        self.shared_vocab = min(ve, vc)

    def build_inputs(self, audio, prompt_type: str, prompt: str | None = None) -> PromptInputs:
        text = prompt if prompt is not None else self.prompt
        ids = self.tokenizer(text, return_tensors="pt").input_ids
        if ids.shape[1] == 0:
            raise BackendError("the hf backend needs a non-empty --prompt")
        return PromptInputs(ids, info={"prompt": text})
