"""The runner's lean forward (issue 44 item 5): a Qwen2-family causal LM called layer by layer.

On a CPU with small models a third of a one-token forward is transformers' own Python around
the layers (output-capturing and config-default wrappers, two ModelOutput objects, the layer
list sliced anew each call): 0.34 ms of the demo edge's 1.31 ms, which speculative decoding pays
k times a round. For one unpadded sequence whose mask the runner prepares already
(runner.prepared_masks) the runner can call the embeddings, rotary embedding, decoder layers,
final norm and LM head itself. Used only where it was checked, once per model object, to give
bit for bit the model's own logits and cache (prefill, a two-token step, a one-token step), and
never on a model with forward hooks (a recording, the cost probe's timer): those see the model's
own forward call.
"""
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
    if known is not None:
        return known
    ok = parts(model) is not None
    if ok:
        try:
            ok = _same(model, causal_mask)
        except Exception:   # noqa: BLE001 - a model the layer loop does not fit keeps its own call
            ok = False
    _CHECKED[model] = ok
    return ok


def _same(model, causal_mask) -> bool:
    dev = next(model.parameters()).device
    ids = torch.tensor([[1, 2, 3, 4, 5, 6, 7]], device=dev) % int(model.config.vocab_size)
    pos = torch.arange(7, device=dev)[None]
    got = []
    with torch.inference_mode():
        for lean in (False, True):
            cache, out = DynamicCache(), []
            for a, b in ((0, 4), (4, 6), (6, 7)):        # prefill, two tokens, one token
                m = causal_mask(a, b - a, dev)
                if lean:
                    out.append(forward(model, ids[:, a:b], pos[:, a:b], m, cache))
                else:
                    out.append(model(input_ids=ids[:, a:b], position_ids=pos[:, a:b], use_cache=True,
                                     attention_mask={"full_attention": m}, **with_cache(model, cache)).logits[0])
            got.append(out)
    return all(torch.equal(x, y) for x, y in zip(*got))
