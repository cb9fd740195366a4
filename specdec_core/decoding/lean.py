"""The runner's lean forward (issue 44 item 5): a Qwen2-family causal LM called layer by layer.

On a CPU with small models transformers' own Python around the layers is 0.34 ms of the demo
edge's 1.31 ms one-token forward, paid k times a round. For one unpadded sequence whose mask the
runner prepares already the runner calls the layers itself. Used only where it was checked, once
per model object, to give bit for bit the model's own logits and cache, and never on a model with
forward hooks (a recording, the cost probe's timer): those see the model's own forward call."""
from __future__ import annotations

import weakref

import torch
from transformers import DynamicCache

from specdec_core.compat import with_cache

_CHECKED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def parts(model):
    """(embed, rotary, layers, norm, head) of a Qwen2/Llama-style causal LM, or None."""
    base, head = getattr(model, "model", None), getattr(model, "lm_head", None)
    names = ("embed_tokens", "rotary_emb", "layers", "norm")
    if head is None or base is None or not all(hasattr(base, n) for n in names):
        return None
    n = getattr(model.config, "num_hidden_layers", len(base.layers))
    return base.embed_tokens, base.rotary_emb, list(base.layers)[:n], base.norm, head


def forward(model, ids: torch.Tensor, pos: torch.Tensor, mask, cache, keep: int = 0) -> torch.Tensor:
    """[n, V] logits (the last `keep` positions; 0 = all) of `ids` at `pos`, the keys and values
    appended to `cache`; `mask` as the model takes it in {"full_attention": mask}."""
    embed, rotary, layers, norm, head = parts(model)
    h = embed(ids)
    pe = rotary(h, pos)
    kw = with_cache(layers[0], cache)
    for layer in layers:
        h = layer(h, attention_mask=mask, position_embeddings=pe, position_ids=pos, use_cache=True, **kw)
    h = norm(h)
    return head(h[:, -keep:] if keep else h)[0]


def usable(model, causal_mask) -> bool:
    """Whether `forward` gives exactly the model's own logits (checked once per model object)."""
    known = _CHECKED.get(model)
    if known is None:
        known = _CHECKED[model] = parts(model) is not None and same_logits(
            model, lambda ids, pos, cache, past: forward(model, ids, pos, causal_mask(past, ids.shape[1], pos.device), cache))
    return known


def same_logits(model, call) -> bool:
    """Whether `call(ids, pos, cache, past)` gives exactly the model's own logits [n, V] on a prefill,
    a two-token step and a one-token step, each cache filled by its own calls; any exception: False."""
    dev = next(model.parameters()).device
    ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7]], device=dev) % int(model.config.vocab_size)
    pos = torch.arange(7, device=dev)[None]
    own = lambda i, p, cache, past: model(input_ids=i, position_ids=p, use_cache=True,  # noqa: E731
                                          **with_cache(model, cache)).logits[0]
    try:
        with torch.inference_mode():
            got = [[fn(ids[:, a:b], pos[:, a:b], cache, a) for a, b in ((0, 4), (4, 6), (6, 7))]
                   for fn, cache in ((own, DynamicCache()), (call, DynamicCache()))]
        return all(torch.equal(x, y) for x, y in zip(*got))
    except Exception:   # noqa: BLE001
        return False
