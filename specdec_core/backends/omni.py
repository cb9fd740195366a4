"""Qwen2.5-Omni thinkers as the edge/cloud pair: 3B drafts, 7B verifies, on one GPU. One prompt
for both; audio features only in the prefill, explicit 3-row mrope positions after it (docs/omni.md)."""
from __future__ import annotations

import inspect
import os
import re

import numpy as np
import torch

from specdec_core.backends import omni_prompts
from specdec_core.backends.base import Backend, PromptInputs
from specdec_core.backends.omni_loading import (
    check_config_ids, check_gpu_memory, check_same_tokenizer, load_processor, pick_device,
    read_thinker_config, resolve_path)
from specdec_core.backends.hf import load_causal_lm
from specdec_core.compat import output_cache, with_cache
from specdec_core.decoding.runner import ModelRunner, tree_mask
from specdec_core.errors import AudioError, BackendError, ConfigError

ENV_EDGE = "SPECSCOPE_EDGE_MODEL"
ENV_CLOUD = "SPECSCOPE_CLOUD_MODEL"
STOP_TOKENS = ("<|im_end|>", "<|endoftext|>")
DEFAULT_STOP_IDS = [151645, 151643]
MAX_AUDIO_SECONDS = 30.0          # the Whisper front end pads/cuts every clip to 30 s


class OmniRunner(ModelRunner):
    """ModelRunner with Qwen2.5-Omni mrope positions: the prompt's 3-row positions from
    get_rope_index, a later token at absolute index i at i + rope_delta on all three rows, as in
    the model's own generate. Recomputed at every prefill (docs/omni.md)."""

    # The prefill carries the audio features: a first step merged into it would also scatter
    # them over any drafted id that happens to be an audio placeholder (the model then raises).
    merge_prefill = False

    def __init__(self, model, vocab_size=None):
        super().__init__(model, vocab_size)
        self.rope_delta = 0
        self._prompt_pos: torch.Tensor | None = None
        # Older transformers thinkers take cache_position; 5.x derives it from the cache length.
        self._cache_position = "cache_position" in inspect.signature(model.forward).parameters

    def prefill(self, prompt) -> None:
        super().prefill(prompt)
        ids = self._prompt_ids
        fam = self._prefill_kwargs.get("feature_attention_mask")
        try:
            pos, delta = self.model.get_rope_index(
                input_ids=ids, attention_mask=torch.ones_like(ids),
                audio_seqlens=None if fam is None else fam.sum(-1))
        except AttributeError:
            # A config without the vision frame ids (not a 5.23 config field): for an audio-only
            # prompt get_rope_index would return exactly these plain positions anyway.
            pos = torch.arange(ids.shape[1], device=self.device).view(1, 1, -1).expand(3, 1, -1)
            delta = torch.zeros(1, 1, dtype=torch.long)
        self._prompt_pos = pos.to(self.device)
        self.rope_delta = int(delta.reshape(-1)[0])

    def positions(self, start: int, n: int) -> torch.Tensor:
        """[3, 1, n] mrope positions of absolute indices start..start+n-1."""
        pos = torch.arange(start, start + n, device=self.device) + self.rope_delta
        pos = pos.view(1, 1, n).expand(3, 1, n).clone()
        plen = self._prompt_pos.shape[-1]
        if start < plen:
            end = min(plen, start + n)
            pos[..., : end - start] = self._prompt_pos[..., start:end]
        return pos

    def _forward(self, ids: torch.Tensor, start: int, prefill: bool, keep: int = 0,
                 mask=None) -> torch.Tensor:
        n = ids.shape[1]
        extra = dict(self._prefill_kwargs) if prefill else {}
        if self.static:     # engine=static: the audio prefill runs eager, steps at fixed widths
            rows = self.static.step(self, ids, self.positions(start, n), None,
                                    self._static_call(extra), eager=prefill)
            rows, self.step_features = rows if isinstance(rows, tuple) else (rows, None)
            return self._cut(rows[-keep:] if keep else rows)
        if prefill:
            extra["attention_mask"] = torch.ones_like(ids)
        out = self.model(input_ids=ids, position_ids=self.positions(start, n), use_cache=True,
                         **with_cache(self.model, self.cache), **self._at(start, n), **extra)
        self.cache = output_cache(out)
        # the 5.23 thinker has no logits_to_keep: slice after the head
        return self._cut(out.logits[0, -keep:] if keep else out.logits[0])

    def _at(self, start: int, n: int) -> dict:
        """cache_position for the thinkers that take it (older transformers), else nothing."""
        return {"cache_position": torch.arange(start, start + n, device=self.device)} if self._cache_position else {}

    def _static_call(self, extra: dict):
        """The thinker at a fixed width: 3-row mrope positions (text position + rope_delta past
        the prompt), the plan's mask as a 4D additive mask, writes at the static cache's slot."""
        if self._cache_position and self.static.graphs:
            raise ConfigError("engine=graphs: this transformers' thinker takes cache_position, "
                              "which a captured graph would freeze; use engine=static")

        def call(ids, pos, vis):
            out = self.model(input_ids=ids, position_ids=pos, use_cache=True,
                             attention_mask=tree_mask(vis, False, self.model, self.device),
                             **with_cache(self.model, self.cache), **self._at(self._len, ids.shape[1]), **extra)
            return out.logits[0]
        return call


class OmniBackend(Backend):
    name = "omni"
    needs_audio = True

    def __init__(self, edge_model=None, cloud_model=None, device=None, force_cpu: bool = False,
                 dtype=None, edge=None, cloud=None, processor=None):
        self.info: dict = {}
        if edge is not None and cloud is not None:     # pre-built models (tests, notebooks)
            self.edge, self.cloud = edge.eval(), cloud.eval()
            self.device = next(cloud.parameters()).device
            if processor is None:
                raise BackendError("the omni backend needs a processor with pre-built models")
            self.processor = processor
        else:
            self._load(edge_model, cloud_model, device, force_cpu, dtype, processor)
        self.tokenizer = self.processor.tokenizer
        self.dtype = next(self.cloud.parameters()).dtype
        for role, m in (("edge", self.edge), ("cloud", self.cloud)):
            check_config_ids(m.config, self.tokenizer, role)
        ids = [self.tokenizer.convert_tokens_to_ids(t) for t in STOP_TOKENS]
        unk = self.tokenizer.unk_token_id
        self.stop_ids = [i for i in ids if i is not None and i != unk] or list(DEFAULT_STOP_IDS)
        # The 7B head (152064 rows) is wider than the 3B's (151936): compare on the common part.
        self.shared_vocab = self.head_rows()

    def _load(self, edge_model, cloud_model, device, force_cpu, dtype, processor) -> None:
        edge_path = resolve_path(edge_model, ENV_EDGE, "edge")
        cloud_path = resolve_path(cloud_model, ENV_CLOUD, "cloud")
        same = os.path.realpath(edge_path) == os.path.realpath(cloud_path)
        configs = {"cloud": read_thinker_config(cloud_path, "cloud")}
        if not same:
            configs["edge"] = read_thinker_config(edge_path, "edge")
        self.device = pick_device(device, force_cpu)
        on_gpu = self.device.type == "cuda"
        dtype = dtype or (torch.bfloat16 if on_gpu else torch.float32)
        self.processor = processor or load_processor(cloud_path, "cloud")
        if not same:
            sample = omni_prompts.SYSTEM_PROMPT + omni_prompts.INSTRUCTIONS["detailed"]
            check_same_tokenizer(load_processor(edge_path, "edge").tokenizer,
                                 self.processor.tokenizer, sample)
        if on_gpu:
            self.info["memory"] = check_gpu_memory(configs, self.device, dtype)
        from transformers import Qwen2_5OmniThinkerForConditionalGeneration as Thinker

        self.cloud = load_causal_lm(cloud_path, "cloud", dtype, self.device, Thinker)
        self.edge = self.cloud if same else load_causal_lm(edge_path, "edge", dtype, self.device, Thinker)
        self.paths = {"edge": edge_path, "cloud": cloud_path}

    def build_inputs(self, audio, prompt_type: str) -> PromptInputs:
        samples, duration = _samples(audio)
        if duration > MAX_AUDIO_SECONDS:
            raise AudioError(f"clip too long for the Omni audio encoder: {duration:.1f} s "
                             f"(at most {MAX_AUDIO_SECONDS:g} s)")
        conv = omni_prompts.conversation(prompt_type)
        template = None if getattr(self.processor, "chat_template", None) else omni_prompts.CHAT_TEMPLATE
        text = self.processor.apply_chat_template(conv, chat_template=template,
                                                  add_generation_prompt=True, tokenize=False)
        feats = self.processor(text=[text], audio=[samples], return_tensors="pt", padding=True)
        audio_id = self.tokenizer.convert_tokens_to_ids("<|AUDIO|>")
        ids = feats["input_ids"]
        n_audio = int((ids == audio_id).sum())
        prefill = {
            "input_features": feats["input_features"].to(self.device, self.dtype),
            "feature_attention_mask": feats["feature_attention_mask"].to(self.device),
        }
        shown = re.sub(r"(<\|AUDIO\|>)+", f"<|AUDIO|>×{n_audio}", self.tokenizer.decode(ids[0]))
        return PromptInputs(ids, prefill, info={
            "prompt": shown, "prompt_type": prompt_type, "system": omni_prompts.SYSTEM_PROMPT,
            "instruction": omni_prompts.instruction(prompt_type), "audio_tokens": n_audio,
            "audio_seconds": round(duration, 3)})

    def counterfactual_inputs(self, prompt: PromptInputs) -> PromptInputs | None:
        """The same ids with the audio span's features silenced: every valid frame set to the
        log-mel the feature extractor gives for silence (same shapes: one batched forward)."""
        feats = prompt.prefill_kwargs.get("input_features")
        if feats is None:
            return None
        fe = self.processor.feature_extractor
        quiet = fe([np.zeros(1600, dtype=np.float32)], sampling_rate=16000,
                   return_tensors="pt")["input_features"][0, :, 0]
        silent = quiet.to(feats.device, feats.dtype).view(1, -1, 1).expand_as(feats).clone()
        fam = prompt.prefill_kwargs.get("feature_attention_mask")
        if fam is not None:          # padding frames stay as the processor wrote them
            pad = ~fam.bool().to(feats.device).unsqueeze(1).expand_as(feats)
            silent[pad] = feats[pad]
        return PromptInputs(prompt.input_ids, {**prompt.prefill_kwargs, "input_features": silent},
                            info={**prompt.info, "counterfactual": "audio features silenced"})

    def make_runner(self, model, role: str) -> ModelRunner:
        return OmniRunner(model, vocab_size=self.shared_vocab)

    def describe(self) -> dict:
        d = super().describe()
        d.update(shared_vocab=self.shared_vocab, device=str(self.device), **self.info)
        return d


def _samples(audio) -> tuple[np.ndarray, float]:
    """16 kHz float32 mono from an Audio (specdec_core.audio) or a path/bytes/tuple."""
    if not hasattr(audio, "samples"):
        from specdec_core.audio.loading import load_audio

        audio = load_audio(audio)
    if getattr(audio, "sr", 16000) != 16000:
        raise AudioError(f"the Omni processor needs 16 kHz audio, got {audio.sr} Hz")
    samples = np.asarray(audio.samples, dtype=np.float32)
    return samples, len(samples) / 16000
