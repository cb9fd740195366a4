"""GLUE shared by the adapters in this folder (not public code): the transformers-4 interface
that 2023-24 loops were written against, on transformers 5.

transformers 5 no longer takes or returns legacy `past_key_values` (a tuple per layer of
(key, value) tensors [batch, heads, seq, head_dim]); iterating a `DynamicCache` yields 3-tuples.
`LegacyCacheModel(model)` is a thin callable around a Hugging Face model that takes a legacy
tuple cache (or None), hands the model a `DynamicCache` built from those tensors (transformers 5
copies them), and returns the cache as a legacy tuple again. The model's own forward (and the
recorder's hooks on it) run unchanged; the model sees a new cache object every forward, which
the recorder follows by content (docs/recorder.md, "Cache identity").
"""
from transformers import DynamicCache


def to_legacy(cache):
    if cache is None or isinstance(cache, tuple):
        return cache
    return tuple((layer.keys, layer.values) for layer in cache.layers)


class LegacyCacheModel:
    def __init__(self, model):
        self.model = model
        self.config = model.config
        self.device = model.device

    def __call__(self, input_ids=None, past_key_values=None, use_cache=None, **kw):
        if past_key_values is not None and not isinstance(past_key_values, DynamicCache):
            past_key_values = DynamicCache(ddp_cache_data=[(k, v) for k, v in past_key_values])
        out = self.model(input_ids=input_ids, past_key_values=past_key_values,
                         use_cache=use_cache, **kw)
        out.past_key_values = to_legacy(out.past_key_values)
        return out


