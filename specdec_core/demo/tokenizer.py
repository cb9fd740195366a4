"""Character-level tokenizer for the demo models, saved in Hugging Face format.

One id per character keeps the trace readable (every drafted token is one 汉字 or mark) and makes
the source notes' failure modes (adjacent repeats, short cycles) visible at token granularity.
Chat markers, condition tokens and prompt-type tokens are added special tokens: single ids,
dropped by skip_special_tokens, never split by the character model.
"""
from __future__ import annotations

import string
from pathlib import Path

from tokenizers import Tokenizer, decoders, models
from transformers import PreTrainedTokenizerFast

from .. import conditions as C
from . import corpus

EOT, IM_START, IM_END, UNK = "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>"
CHAT_TOKENS = [EOT, IM_START, IM_END]
EXTRA_PUNCT = "，。、；：？！“”‘’（）《》【】—…·～\n"

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def special_tokens() -> list[str]:
    return [*CHAT_TOKENS, *C.all_condition_tokens(), *corpus.TYPE_TOKENS.values()]


def build_tokenizer() -> PreTrainedTokenizerFast:
    # Sorted so the ids are the same on every machine (sets iterate in hash order).
    chars = sorted(corpus.charset() | set(string.printable) | set(EXTRA_PUNCT))
    chars = [c for c in chars if c not in "\r\x0b\x0c"]
    vocab = {UNK: 0}
    for tok in special_tokens():
        vocab[tok] = len(vocab)
    for c in chars:
        vocab.setdefault(c, len(vocab))
    # BPE with no merges over single characters == a character model; no pre-tokenizer, so
    # spaces and newlines are ordinary tokens and Fuse() rebuilds the text exactly.
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token=UNK, fuse_unk=False))
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(special_tokens() + [UNK])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=EOT, pad_token=EOT, unk_token=UNK,
        additional_special_tokens=[IM_START, IM_END] + special_tokens()[3:],
        chat_template=CHAT_TEMPLATE, model_max_length=512, clean_up_tokenization_spaces=False,
    )
    return fast


def save_tokenizer(folder: str | Path) -> PreTrainedTokenizerFast:
    tok = build_tokenizer()
    tok.save_pretrained(str(folder))
    return tok
