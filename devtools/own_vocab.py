"""A demo edge with its OWN tokenizer (issue 36): the drafter of universal assisted generation,
the demo edge with every id moved and the condition tokens left out (docs/recorder.md,
"Drafters with their own tokenizer").

    python -m devtools.own_vocab OUT_DIR      (from the repository root)
"""
from __future__ import annotations

import sys
from pathlib import Path

import torch
from transformers.models.qwen2.tokenization_qwen2 import Qwen2Tokenizer

from devtools import demo_tokenizer as demo_tok
from specdec_core.backends.demo import MODELS_DIR

KEPT_SPECIALS = [demo_tok.EOT, demo_tok.IM_START, demo_tok.IM_END]


def own_vocab() -> tuple[dict[str, int], list[str]]:
    """(new vocab: token -> id, the demo token of each new id)."""
    vocab, _ = demo_tok.vocab_and_merges()
    specials = set(demo_tok.special_tokens())
    plain = [t for t in sorted(vocab, key=vocab.get) if t not in specials]
    order = KEPT_SPECIALS + plain[::-1]
    return {t: i for i, t in enumerate(order)}, order


def build_tokenizer() -> Qwen2Tokenizer:
    vocab, _ = own_vocab()
    _, merges = demo_tok.vocab_and_merges()
    E = demo_tok.EOT
    return Qwen2Tokenizer(vocab=vocab, merges=merges, unk_token=E, eos_token=E, pad_token=E,
                          extra_special_tokens=KEPT_SPECIALS[1:], chat_template=demo_tok.CHAT_TEMPLATE,
                          model_max_length=512, clean_up_tokenization_spaces=False)


@torch.no_grad()
def build_edge(edge, demo_tokenizer):
    """The demo edge re-indexed to the own vocabulary (a new model; `edge` is untouched)."""
    import copy

    _, order = own_vocab()
    old = [demo_tokenizer.convert_tokens_to_ids(t) for t in order]
    m = copy.deepcopy(edge)
    emb = edge.get_input_embeddings().weight[torch.tensor(old)].clone()
    m.resize_token_embeddings(len(order))
    m.get_input_embeddings().weight.copy_(emb)
    if not m.config.tie_word_embeddings:
        m.get_output_embeddings().weight.copy_(edge.get_output_embeddings().weight[torch.tensor(old)])
    ids = build_tokenizer().convert_tokens_to_ids
    m.config.eos_token_id = [ids(demo_tok.IM_END), ids(demo_tok.EOT)]
    m.config.pad_token_id = m.config.bos_token_id = ids(demo_tok.EOT)
    m.generation_config.eos_token_id = m.config.eos_token_id
    m.generation_config.pad_token_id = m.generation_config.bos_token_id = ids(demo_tok.EOT)
    return m.eval()


def save(folder: str | Path, edge=None, demo_tokenizer=None) -> Path:
    """Write the own-vocabulary edge and its tokenizer to `folder` (from the shipped demo edge
    unless one is given)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    edge = edge or AutoModelForCausalLM.from_pretrained(MODELS_DIR / "edge")
    demo_tokenizer = demo_tokenizer or AutoTokenizer.from_pretrained(MODELS_DIR / "cloud")
    folder = Path(folder)
    build_edge(edge, demo_tokenizer).save_pretrained(folder)
    build_tokenizer().save_pretrained(folder)
    return folder


if __name__ == "__main__":
    print(save(sys.argv[1] if len(sys.argv) > 1 else "own_vocab_edge"))
