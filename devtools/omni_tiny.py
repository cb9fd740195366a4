"""Tiny random-init Qwen2.5-Omni thinkers and a locally built Omni processor (no downloads):
the test suite's Omni models, and `make_tiny_pair` (scripts/make_tiny_omni.py) for users who
want to try the Omni backend or the recorder without weights.

The shapes follow transformers' own Omni tests (a couple of layers, small hidden sizes, a small
audio encoder) except the mel bins: 128, as in the real checkpoints, so that the real Whisper
feature extractor and the real processor can feed them. The tokenizer is char-level with the
Omni special tokens, so every prompt character round-trips and the ids are small.
"""
from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import (PreTrainedTokenizerFast, Qwen2_5OmniThinkerConfig,
                          Qwen2_5OmniThinkerForConditionalGeneration,
                          WhisperFeatureExtractor)

from specdec_core.backends import omni_prompts
from specdec_core.backends.omni_loading import audio_only_processor

# Same order as the real Qwen2.5 vocabulary's added tokens (ids differ: ours are small).
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|AUDIO|>", "<|audio_bos|>",
            "<|audio_eos|>", "<|vision_bos|>", "<|vision_eos|>", "<|IMAGE|>", "<|VIDEO|>"]
NAMED = {"audio_token": "<|AUDIO|>", "audio_bos_token": "<|audio_bos|>",
         "audio_eos_token": "<|audio_eos|>", "image_token": "<|IMAGE|>", "video_token": "<|VIDEO|>",
         "vision_bos_token": "<|vision_bos|>", "vision_eos_token": "<|vision_eos|>"}
EXTRA_CHARS = "说话人语速较快音调偏高低平稳量大小色中情绪开心悲伤愤怒惊讶担忧的了是在，。、："


def omni_tokenizer(extra: str = "", lead: tuple = ()) -> PreTrainedTokenizerFast:
    """Char-level tokenizer covering the system prompt, both instructions and some CJK text.
    `lead`: tokens placed before the specials, which shifts their ids (a foreign tokenizer)."""
    text = (omni_prompts.SYSTEM_PROMPT + "".join(omni_prompts.INSTRUCTIONS.values())
            + EXTRA_CHARS + extra + "\nabcdefghijklmnopqrstuvwxyz0123456789 .,")
    chars = sorted(set(text))
    vocab = {t: i for i, t in enumerate(dict.fromkeys([*lead, *SPECIALS, "<unk>", *chars]))}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", extra_special_tokens=NAMED)
    fast.add_special_tokens({"additional_special_tokens": SPECIALS}, replace_extra_special_tokens=False)
    return fast


def omni_processor(tokenizer=None):
    """The real processor's audio path around a real (constructed) Whisper feature extractor."""
    fe = WhisperFeatureExtractor(feature_size=128, sampling_rate=16000)
    return audio_only_processor(fe, tokenizer or omni_tokenizer(), omni_prompts.CHAT_TEMPLATE)


def tiny_thinker_config(tokenizer, vocab: int, hidden: int = 64, layers: int = 2,
                        init: float = 0.02) -> Qwen2_5OmniThinkerConfig:
    ids = tokenizer.convert_tokens_to_ids
    heads = 4
    head_dim = hidden // heads
    half = head_dim // 2                       # mrope sections split the rotary half-dim
    section = [half - 2 * (half // 3), half // 3, half // 3]
    text = dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=hidden * 2,
                num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=2,
                max_position_embeddings=4096, rms_norm_eps=1e-6, tie_word_embeddings=False,
                initializer_range=init,
                rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": section})
    audio = dict(d_model=32, encoder_attention_heads=4, encoder_ffn_dim=64, encoder_layers=1,
                 num_mel_bins=128, max_source_positions=1500, n_window=100, output_dim=hidden,
                 initializer_range=init)
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=4, out_hidden_size=hidden,
                  patch_size=14, spatial_merge_size=1, temporal_patch_size=2, fullatt_block_indexes=[0])
    return Qwen2_5OmniThinkerConfig(
        audio_config=audio, vision_config=vision, text_config=text, initializer_range=init,
        audio_token_index=ids("<|AUDIO|>"), image_token_index=ids("<|IMAGE|>"),
        video_token_index=ids("<|VIDEO|>"), audio_start_token_id=ids("<|audio_bos|>"),
        audio_end_token_id=ids("<|audio_eos|>"), vision_start_token_id=ids("<|vision_bos|>"),
        vision_end_token_id=ids("<|vision_eos|>"), user_token_id=ids("u"))


def tiny_thinker(config, seed: int) -> Qwen2_5OmniThinkerForConditionalGeneration:
    torch.manual_seed(seed)
    return Qwen2_5OmniThinkerForConditionalGeneration(config).eval()


def perturb(model, scale: float, seed: int) -> None:
    """Noise on the language model's weights in place: a draft that agrees only partly. Every
    parameter outside the audio and vision towers (5.24 names them model.language_model.*, 5.0
    model.layers.*)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "audio_tower" not in name and "visual" not in name:
                p.add_(torch.randn(p.shape, generator=g) * scale * p.std().clamp_min(1e-3))


def save_folder(model, processor, folder: Path) -> Path:
    """An HF folder like a published thinker: config, safetensors weights, tokenizer files,
    preprocessor_config.json (the Whisper front end) and the chat template."""
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    processor.tokenizer.save_pretrained(folder)
    processor.feature_extractor.save_pretrained(folder)
    (folder / "chat_template.jinja").write_text(processor.chat_template)
    return folder


def save_published_layout(model, processor, folder: Path) -> Path:
    """The layout of the hub folders (Qwen/Qwen2.5-Omni-7B): a whole-model config with the
    thinker under `thinker_config`, weights prefixed `thinker.` (no talker here)."""
    import json

    from safetensors.torch import save_file

    save_folder(model, processor, folder)
    cfg = {"model_type": "qwen2_5_omni", "architectures": ["Qwen2_5OmniForConditionalGeneration"],
           "thinker_config": model.config.to_dict(), "enable_audio_output": False}
    (folder / "config.json").write_text(json.dumps(cfg))
    weights = {"thinker." + k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


def quiet_padding(model, n_tokens: int, placeholders=()) -> None:
    """Zero the head rows past the tokenizer and those of the audio/image/video placeholders
    (logit 0: never a greedy choice against the real rows' positive maximum), like the
    never-emitted padding and placeholder rows of published Qwen heads. A random head does emit
    them: a drafted <|AUDIO|> then makes the verify forward scatter audio features into it."""
    with torch.no_grad():
        w = model.get_output_embeddings().weight
        w[n_tokens:] = 0
        for i in placeholders:
            w[i] = 0


def make_tiny_pair(out_dir, vocab: int = 160, perturbation: float = 0.02, seed: int = 1) -> dict:
    """Write OUT/cloud (a random-init tiny thinker) and OUT/edge (a perturbed copy, so that some
    drafts are rejected) as published-style thinker folders; heads `vocab` rows wide, wider
    than the 149-token tokenizer as in every real Qwen pair. Returns {"edge": Path, "cloud": Path}."""
    out = Path(out_dir)
    tok = omni_tokenizer()
    proc = omni_processor(tok)
    cfg = tiny_thinker_config(tok, vocab, hidden=64, layers=2, init=0.3)
    cloud, edge = tiny_thinker(cfg, seed), tiny_thinker(cfg, seed)
    perturb(edge, perturbation, seed=seed + 6)
    placeholders = tok.convert_tokens_to_ids(SPECIALS[3:])      # <|AUDIO|> ... <|VIDEO|>
    for m in (cloud, edge):
        quiet_padding(m, len(tok), placeholders)
    return {"cloud": save_folder(cloud, proc, out / "cloud"), "edge": save_folder(edge, proc, out / "edge")}
