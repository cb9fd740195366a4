"""Tiny real models for engine tests: random-init Qwen2 pairs and a char-level tokenizer."""
from __future__ import annotations

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from specdec_core.backends.base import Backend, PromptInputs

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHARS = list("说话人语速较快音调偏高低平稳量大小色中情绪开心悲伤愤怒惊讶担忧的了是在，。、：") + list("abcdefgh .")


def word_level(leading: list[str], chars, **special) -> PreTrainedTokenizerFast:
    """One id per character after the `leading` tokens; `special` names unk/pad/eos tokens."""
    vocab = {}
    for t in list(leading) + list(chars):
        vocab.setdefault(t, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token=special.get("unk_token", leading[0])))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(tokenizer_object=tok, **special)


def char_tokenizer(chars=CHARS) -> PreTrainedTokenizerFast:
    fast = word_level(SPECIALS + ["<unk>"], chars, unk_token="<unk>", eos_token="<|im_end|>",
                      pad_token="<|endoftext|>")
    fast.add_special_tokens({"additional_special_tokens": SPECIALS})
    return fast


def tiny_qwen2(vocab: int, hidden=32, layers=2, seed=0, init=0.02) -> Qwen2ForCausalLM:
    torch.manual_seed(seed)
    cfg = Qwen2Config(vocab_size=vocab, hidden_size=hidden, intermediate_size=hidden * 2,
                      num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=1024, initializer_range=init, tie_word_embeddings=False)
    return Qwen2ForCausalLM(cfg).eval()


class PairBackend(Backend):
    """Two tiny models and a text prompt; no audio."""

    name = "tiny"
    needs_audio = False

    def __init__(self, edge, cloud, tokenizer, stop_ids=None):
        self.edge, self.cloud, self.tokenizer = edge, cloud, tokenizer
        self.stop_ids = stop_ids if stop_ids is not None else [tokenizer.convert_tokens_to_ids("<|im_end|>")]
        self.shared_vocab = min(edge.config.vocab_size, cloud.config.vocab_size)

    def build_inputs(self, audio, prompt_type, ids=None):
        return PromptInputs(torch.tensor([ids or [1, 5, 6, 7]]), info={})


def perturbed(model, scale: float, seed: int):
    """A copy of `model` with noise on every weight: a draft that agrees partially."""
    import copy

    m = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale * p.std().clamp_min(1e-3))
    return m
