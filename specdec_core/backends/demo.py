"""The embedded default backend: the tiny char-level edge/cloud pair shipped in the package,
conditioned on prosody tokens read from the audio. Runs on CPU, needs no download."""
from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoTokenizer
from transformers.utils import logging as hf_logging

from specdec_core.audio import conditions
from specdec_core.demo import prompt
from specdec_core.demo.head import DraftHead
from specdec_core.errors import BackendError, ConfigError
from specdec_core.backends.base import Backend, PromptInputs
from specdec_core.backends.hf import load_causal_lm

MODELS_DIR = Path(__file__).resolve().parents[1] / "demo" / "models"


def _load(folder: Path, role: str, dtype=torch.float32):
    if not (folder / "model.safetensors").is_file():
        raise BackendError(f"demo {role} model missing at {folder} (run scripts/train_demo.py)")
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a 1 MB load needs no progress bar on the CLI's stderr
    try:
        return load_causal_lm(str(folder), role, dtype)
    finally:
        if bars:
            hf_logging.enable_progress_bar()


class DemoBackend(Backend):
    name = "demo"
    needs_audio = True

    def __init__(self, models_dir: str | Path = MODELS_DIR, dtype=None, edge_model=None):
        """edge_model: another edge's folder (e.g. one with its own tokenizer, devtools/own_vocab.py)."""
        models_dir = Path(models_dir)
        # float32 unless asked: bfloat16 is the CPU stand-in for a GPU deployment (docs/recorder.md)
        self.dtype = dtype or torch.float32
        self.edge = _load(Path(edge_model) if edge_model else models_dir / "edge", "edge", self.dtype)
        self.cloud = _load(models_dir / "cloud", "cloud", self.dtype)
        # the EAGLE-style draft head trained on the cloud's features (drafter=head, issue 35)
        self.head = (DraftHead.from_pretrained(models_dir / "head", self.dtype)
                     if (models_dir / "head" / "model.safetensors").exists() else None)
        self.tokenizer = AutoTokenizer.from_pretrained(str(models_dir / "cloud"),
                                                       local_files_only=True)
        # Stop by id: <|im_end|> ends the assistant turn, <|endoftext|> ends a document.
        self.stop_ids = [self.tokenizer.convert_tokens_to_ids(prompt.IM_END),
                         self.tokenizer.eos_token_id]
        self.shared_vocab = len(self.tokenizer)

    def build_inputs(self, audio, prompt_type: str) -> PromptInputs:
        from specdec_core.audio import prosody  # lazy: the tokens-only path (tests, tools) needs no audio stack
        p = prosody.extract(audio)
        inputs = self.build_inputs_from_tokens(conditions.condition_tokens(p.bins), prompt_type)
        inputs.info.update(prosody=dict(p.values), bins=dict(p.bins),
                           prosody_text=prosody.describe(p, note=False), prosody_normalisation=p.normalisation,
                           prosody_note=p.note)
        return inputs

    def build_inputs_from_tokens(self, cond_tokens: list[str], prompt_type: str) -> PromptInputs:
        if prompt_type not in conditions.PROMPT_TYPES:
            raise ConfigError(f"prompt_type must be one of {', '.join(conditions.PROMPT_TYPES)}, "
                              f"got {prompt_type!r}")
        known = set(conditions.all_condition_tokens())
        unknown = [t for t in cond_tokens if t not in known]
        if unknown:
            raise ConfigError(f"unknown condition token {unknown[0]!r}")
        text = prompt.prompt_text(list(cond_tokens), prompt_type)
        ids = self.tokenizer(text, return_tensors="pt").input_ids
        return PromptInputs(ids, info={"prompt": text, "prompt_type": prompt_type,
                                       "condition_tokens": list(cond_tokens)})

    def counterfactual_inputs(self, prompt: PromptInputs) -> PromptInputs:
        """The prompt with every prosody condition token set to its feature's middle bin (the
        clip tells nothing: the corpus' label_for reads those bins as neutral). Same ids
        otherwise, so the same length: the two rows go through the cloud as one batched forward."""
        conv = self.tokenizer.convert_tokens_to_ids
        ids = prompt.input_ids.clone()
        for feat, values in conditions.FEATURES.items():
            for v in values:
                ids[prompt.input_ids == conv(conditions.token(feat, v))] = conv(
                    conditions.token(feat, NEUTRAL_BINS[feat]))
        return PromptInputs(ids, info={**prompt.info, "counterfactual":
                                       "prosody tokens at their middle bins"})


# Each feature's middle bin: what the demo prompt says when the clip tells nothing.
NEUTRAL_BINS = {f: vals[len(vals) // 2] for f, vals in conditions.FEATURES.items()}
