"""Loading a Qwen2.5-Omni pair safely: model folders, configs, processor, memory and device
checks. Everything a user can get wrong (no GPU, too little memory, a folder that is not an Omni
thinker, two tokenizers that disagree) is refused here with a one-line BackendError, before
gigabytes of weights are read."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import torch

from specdec_core import compat
from specdec_core.backends import omni_prompts
from specdec_core.errors import BackendError, first_line

ENV_FORCE_CPU = "SPECSCOPE_OMNI_FORCE_CPU"
# A published Omni folder holds the whole model (thinker + talker + token2wav, model_type
# qwen2_5_omni); transformers loads just its thinker from it. A saved thinker has its own type.
OMNI_TYPES = ("qwen2_5_omni_thinker", "qwen2_5_omni")
# Tokens whose ids both models must agree on: the chat frame, the stops and the audio slots.
SHARED_SPECIALS = ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|audio_bos|>", "<|AUDIO|>",
                   "<|audio_eos|>")
GIB = 1024 ** 3
# KV caches of both models for a ~2k-token clip, the audio encoder's activations, CUDA context
# and allocator slack: measured needs are well under this on top of the weights.
HEADROOM_BYTES = int(2.5 * GIB)


def resolve_path(value, env: str, role: str) -> str:
    path = value or os.environ.get(env)
    if not path:
        raise BackendError(f"the omni backend needs the {role} model: pass --{role}-model DIR "
                           f"(or a hub id) or set {env}")
    from specdec_core.backends.hf import model_path

    return model_path(path, role)


def read_thinker_config(path: str, role: str):
    """The thinker config of a folder/hub id; a clear error when it is not an Omni thinker."""
    from transformers import Qwen2_5OmniThinkerConfig

    from specdec_core.backends.hf import config_dict

    local = Path(path)
    if local.is_dir() and not (local / "config.json").is_file():
        raise BackendError(f"{role} model folder {path} has no config.json (not a Hugging Face model)")
    kind, cfg = config_dict(path, role)
    if kind not in OMNI_TYPES:
        raise BackendError(f"{role} model at {path} is not a Qwen2.5-Omni thinker (config "
                           f"model_type {kind!r}; expected one of {', '.join(OMNI_TYPES)})")
    cfg = {k: v for k, v in cfg.items() if k != "model_type"}
    try:
        return Qwen2_5OmniThinkerConfig(**cfg)
    except Exception as e:
        raise BackendError(f"bad thinker config in {role} model {path}: {first_line(e)}") from None


def count_parameters(config) -> int:
    """Parameters of a thinker built from `config`, counted on the meta device (no memory)."""
    from transformers import Qwen2_5OmniThinkerForConditionalGeneration

    with torch.device("meta"):
        model = Qwen2_5OmniThinkerForConditionalGeneration(config)
    return sum(p.numel() for p in model.parameters())


def memory_needed(configs: dict, dtype: torch.dtype) -> dict:
    """Bytes per model (weights at `dtype`) plus headroom; configs: role -> config (one entry
    when edge and cloud are the same folder: it is loaded once)."""
    size = torch.empty((), dtype=dtype).element_size()
    parts = {role: count_parameters(cfg) * size for role, cfg in configs.items()}
    parts["headroom"] = HEADROOM_BYTES
    parts["total"] = sum(parts.values())
    return parts


def check_gpu_memory(configs: dict, device: torch.device, dtype: torch.dtype) -> dict:
    need = memory_needed(configs, dtype)
    free, total = torch.cuda.mem_get_info(device)
    if need["total"] > free:
        models = " + ".join(f"{role} {need[role] / GIB:.1f}" for role in configs)
        raise BackendError(
            f"not enough GPU memory for the Omni models: need about {need['total'] / GIB:.1f} GiB "
            f"({models} + {HEADROOM_BYTES / GIB:.1f} headroom), {free / GIB:.1f} GiB free of "
            f"{total / GIB:.1f} GiB on {torch.cuda.get_device_name(device)}")
    return {"needed_gib": round(need["total"] / GIB, 2), "free_gib": round(free / GIB, 2)}


def pick_device(device, force_cpu: bool) -> torch.device:
    force = force_cpu or os.environ.get(ENV_FORCE_CPU, "").strip().lower() in ("1", "true", "yes")
    wanted = torch.device(device) if device else None
    if wanted is None or wanted.type == "cuda":
        if torch.cuda.is_available():
            return wanted or torch.device("cuda")
        if not force:
            raise BackendError(
                "the omni backend needs a CUDA GPU (Qwen2.5-Omni 3B + 7B in bf16 need about "
                f"28 GiB) and none is available; set {ENV_FORCE_CPU}=1 (or force_cpu=True) to run "
                "on the CPU anyway, which is very slow")
        return torch.device("cpu")
    if wanted.type == "cpu" and not force:
        raise BackendError(f"the omni backend on the CPU is very slow; set {ENV_FORCE_CPU}=1 (or "
                           "force_cpu=True) to run it there anyway")
    return wanted


def load_processor(path: str, role: str):
    """The folder's Omni processor. Without torchvision transformers cannot build the
    processor's video part at all; audio never uses it, so the processor is then assembled
    from the folder's tokenizer and Whisper feature extractor as an audio-only processor."""
    from transformers import AutoTokenizer, Qwen2_5OmniProcessor, WhisperFeatureExtractor

    from specdec_core.backends.hf import chat_template

    first = None
    if importlib.util.find_spec("torchvision") is not None:
        try:
            return Qwen2_5OmniProcessor.from_pretrained(path)
        except Exception as e:   # e.g. a folder without image-processor files: go audio-only
            first = e
    try:
        return audio_only_processor(WhisperFeatureExtractor.from_pretrained(path),
                                    AutoTokenizer.from_pretrained(path), chat_template(path))
    except Exception as e:
        raise BackendError(f"cannot load the Omni processor from {role} model {path}: "
                           f"{first_line(first or e)}") from None


def audio_only_processor(feature_extractor, tokenizer, chat_template=None):
    """The real Qwen2_5OmniProcessor (its audio features, audio-token expansion and chat
    template) without image/video parts, which it would refuse as missing."""
    from transformers import Qwen2_5OmniProcessor

    class AudioOnlyOmniProcessor(Qwen2_5OmniProcessor):
        def check_argument_for_proper_class(self, name, arg):
            if arg is None and name in ("image_processor", "video_processor"):
                return None
            return super().check_argument_for_proper_class(name, arg)

        @property
        def model_input_names(self):
            return list(dict.fromkeys(self.tokenizer.model_input_names
                                      + self.feature_extractor.model_input_names
                                      + ["feature_attention_mask"]))

    return compat.audio_only_processor(AudioOnlyOmniProcessor(  # stand-ins before 5.23: compat.py
        image_processor=None, video_processor=None, feature_extractor=feature_extractor,
        tokenizer=tokenizer, chat_template=chat_template or omni_prompts.CHAT_TEMPLATE))


def check_same_tokenizer(edge_tok, cloud_tok, sample: str) -> None:
    """Both models prefill the cloud's prompt ids, so the ids must mean the same to both."""
    for t in SHARED_SPECIALS:
        a, b = edge_tok.convert_tokens_to_ids(t), cloud_tok.convert_tokens_to_ids(t)
        if a != b or a is None or a == cloud_tok.unk_token_id:
            raise BackendError(f"edge and cloud tokenizers differ: {t} is id {b} for the cloud and "
                               f"{a} for the edge (the pair must share one tokenizer)")
    if edge_tok(sample).input_ids != cloud_tok(sample).input_ids:
        raise BackendError("edge and cloud tokenizers differ: they encode the prompt text "
                           "differently (the pair must share one tokenizer)")


def check_config_ids(config, tokenizer, role: str) -> None:
    """The model's audio slots must be the tokenizer's audio tokens, or the features land on
    the wrong positions."""
    pairs = (("audio_token_index", "<|AUDIO|>"), ("audio_start_token_id", "<|audio_bos|>"),
             ("audio_end_token_id", "<|audio_eos|>"))
    for attr, token in pairs:
        want, got = tokenizer.convert_tokens_to_ids(token), getattr(config, attr, None)
        if got != want:
            raise BackendError(f"{role} model's {attr} is {got} but the tokenizer's {token} is "
                               f"{want} (model and tokenizer do not belong together)")
