"""Character-level tokenizer for the demo models, saved in Hugging Face format.

One id per character keeps the trace readable (every drafted token is one 汉字 or mark) and makes
the source notes' failure modes (adjacent repeats, short cycles) visible at token granularity.

It is a Qwen2-style byte-level BPE whose only merges assemble whole characters: transformers maps
every `qwen2` model folder to Qwen2Tokenizer (it rebuilds the tokenizer from vocab + merges with
the byte-level pre-tokenizer), so any other design would be silently re-tokenised on load.
Merges exist only for the characters the grammar uses (plus common punctuation); any other text
falls back to single bytes, so nothing is ever <unk>. Chat markers, condition tokens and the
prompt-type tokens are added special tokens: single ids, dropped by skip_special_tokens.
"""
from __future__ import annotations

import string
from pathlib import Path

from transformers import AddedToken
from transformers.models.qwen2.tokenization_qwen2 import Qwen2Tokenizer

from specdec_core.audio import conditions as C
from devtools import demo_corpus as corpus
from specdec_core.demo.prompt import EOT, IM_END, IM_START, TYPE_TOKENS
EXTRA_PUNCT = "，。、；：？！“”‘’（）《》【】—…·～"

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def special_tokens() -> list[str]:
    return [EOT, IM_START, IM_END, *C.all_condition_tokens(), *TYPE_TOKENS.values()]


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable-char table, the alphabet of the ByteLevel pre-tokenizer."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) \
        + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def vocab_and_merges() -> tuple[dict[str, int], list[tuple[str, str]]]:
    b2u = _bytes_to_unicode()
    vocab: dict[str, int] = {}
    for tok in special_tokens():
        vocab[tok] = len(vocab)
    for b in range(256):
        vocab[b2u[b]] = len(vocab)
    merges: list[tuple[str, str]] = []
    # Sorted so ids are identical on every machine (sets iterate in hash order).
    chars = sorted(c for c in corpus.charset() | set(EXTRA_PUNCT) if c not in string.printable)
    for c in chars:
        pieces = [b2u[b] for b in c.encode("utf-8")]
        acc = pieces[0]
        for p in pieces[1:]:
            # A merge's left side is always a leading byte (plus what followed it), never a
            # continuation byte, so merges cannot reach across a character boundary.
            if (acc, p) not in merges:
                merges.append((acc, p))
            acc += p
            vocab.setdefault(acc, len(vocab))
    return vocab, merges


def build_tokenizer() -> Qwen2Tokenizer:
    vocab, merges = vocab_and_merges()
    specials = special_tokens()
    tok = Qwen2Tokenizer(
        vocab=vocab, merges=merges, unk_token=EOT, eos_token=EOT, pad_token=EOT,
        extra_special_tokens=specials[1:], chat_template=CHAT_TEMPLATE,
        model_max_length=512, clean_up_tokenization_spaces=False,
    )
    tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in specials],
                   special_tokens=True)
    return tok


def save_tokenizer(folder: str | Path) -> Qwen2Tokenizer:
    tok = build_tokenizer()
    tok.save_pretrained(str(folder))
    return tok
