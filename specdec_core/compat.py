"""The one adapter between SpecScope and the transformers API that changed under us.

transformers 5.24 takes the KV cache as `cache=` and returns it as `out.cache`; older releases
(and user code written for them) use `past_key_values`. A model's own forward signature says
which name it takes, so nothing here depends on a version number."""
from __future__ import annotations

import functools
import inspect

NAMES = ("cache", "past_key_values")
_KW: dict[type, str] = {}       # model class -> the cache keyword its forward takes
_POS: dict[type, int | None] = {}


def _params(model) -> list:
    try:
        return list(inspect.signature(type(model).forward).parameters)
    except (TypeError, ValueError):
        return []


def with_cache(model, cache) -> dict:
    """Keyword arguments that hand `cache` to `model`'s forward (or generate's model call), by
    the keyword its forward takes: 'cache' (transformers >= 5.24) or 'past_key_values' (older
    releases, and models that still declare it)."""
    cls = type(model)
    if cls not in _KW:
        _KW[cls] = "cache" if "cache" in _params(model) else "past_key_values"
    return {_KW[cls]: cache}


def forward_cache(model, args: tuple = (), kwargs: dict | None = None):
    """The cache a forward call was given: by keyword (`cache` or `past_key_values`), by
    position (as the forward's signature places it, counting `self`), or None when absent."""
    kwargs = kwargs or {}
    for name in NAMES:
        if kwargs.get(name) is not None:
            return kwargs[name]
    if args:
        cls = type(model)
        if cls not in _POS:
            params = [p for p in _params(model) if p != "self"]
            _POS[cls] = next((i for i, p in enumerate(params) if p in NAMES), None)
        i = _POS[cls]
        if i is not None and i < len(args):
            return args[i]
    return None


def output_cache(out):
    """The cache a forward returned: `out.cache` (>= 5.24) or `out.past_key_values`, read
    without touching the deprecated alias; None for outputs without one."""
    if out is None:
        return None
    if isinstance(out, dict) or hasattr(out, "keys"):
        keys = set(out.keys())   # not `name in out`: ModelOutput maps the old name and warns
        for name in NAMES:
            c = out[name] if name in keys else None
            if c is not None:
                return c
        return None
    if isinstance(out, tuple) and len(out) > 1:   # return_dict=False: (logits, cache, ...)
        return out[1]
    return None


def audio_only_processor(processor):
    """Qwen2.5-Omni processors before transformers 5.23 (with `replace_multimodal_special_tokens`) read
    `image_processor.merge_size` and `video_processor.merge_size` even for an audio-only prompt
    (AttributeError on 'NoneType'): give them stand-ins carrying just those numbers, never used
    without images or video. Newer processors are returned untouched (detected by API, not version)."""
    if hasattr(type(processor), "replace_multimodal_special_tokens"):
        import types

        stand_in = types.SimpleNamespace(merge_size=1, temporal_patch_size=2, model_input_names=[])
        for name in ("image_processor", "video_processor"):
            if getattr(processor, name, None) is None:
                setattr(processor, name, stand_in)
    return processor


def cache_gather(cache, base: int, slots: list[int]) -> None:
    """Copy the keys and values at absolute `slots` (ascending, each >= base) down to positions
    base, base+1, ... of every layer, in place (a tree's accepted path; the caller crops).
    Every transformers of the tested range (>= 5.0) holds them as `layers[i].keys/values`."""
    import torch

    idx = None
    for t in (getattr(layer, name) for layer in cache.layers for name in ("keys", "values")):
        if idx is None:
            idx = torch.tensor(slots, dtype=torch.long, device=t.device)
        t[..., base: base + len(slots), :] = t.index_select(-2, idx)


def cache_keys(cache, layer: int):
    """One layer's key tensor [batch, heads, slots, dim] of a transformers cache (`layers[i].keys`)
    or a legacy tuple cache; None when there is none. The recorder's one reader of cache content
    (cache identity, slots moved by a tree or a batch realignment)."""
    try:
        layers = getattr(cache, "layers", None)
        t = layers[layer].keys if layers is not None else cache[layer][0]
    except Exception:   # noqa: BLE001 - any other cache: no content read
        return None
    import torch

    return t if isinstance(t, torch.Tensor) and t.dim() == 4 and t.numel() else None


def preallocated(cache) -> bool:
    """A cache of preallocated slots written at a position (transformers' StaticCache layers,
    anything with a `max_cache_len`): loops roll it back by moving the write position, not by
    cropping (recorder: stale_cache's cause and fix)."""
    layers = getattr(cache, "layers", None) or ()
    return any(type(x).__name__.startswith("Static") or hasattr(x, "max_cache_len") for x in layers[:1])


def static_cache(model, max_len: int):
    """A preallocated KV cache of `max_len` slots for `model` (engine=static): transformers'
    StaticCache for the model's text config (an Omni thinker's text model, a head's body). Its
    layers keep their write position as `cumulative_length` (5.24); layers that write where the
    forward's `cache_position` says (5.0; the model counts non-zero slots for it, wrong after a
    rollback) are given one (_at_position)."""
    import torch
    from transformers import StaticCache

    cfg = getattr(model, "config", None)
    cfg = cfg.get_text_config(decoder=True) if hasattr(cfg, "get_text_config") else cfg
    cache = StaticCache(config=cfg, max_cache_len=max_len)
    for layer in cache.layers:
        if not hasattr(layer, "cumulative_length") and _writes_at_cache_position(type(layer)):
            layer.__class__, layer.cumulative_length = _at_position(type(layer)), torch.tensor(0)
    return cache


@functools.cache
def _at_position(cls) -> type:
    """`cls` writing at its own `cumulative_length`, as 5.24's static layers do."""
    import torch

    def update(self, key_states, value_states, cache_kwargs=None):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
            self.cumulative_length = self.cumulative_length.to(self.device)
        pos = torch.arange(key_states.shape[-2], device=self.device) + self.cumulative_length
        self.cumulative_length.add_(key_states.shape[-2])
        return cls.update(self, key_states, value_states, {**(cache_kwargs or {}), "cache_position": pos})

    return type(cls.__name__, (cls,), {"update": update, "get_seq_length": lambda self: self.cumulative_length})


def _writes_at_cache_position(cls) -> bool:
    """A probe, not a version number: does the layer write a key at cache_kwargs' cache_position?"""
    import torch

    try:
        layer, kv = cls(2), torch.ones(1, 1, 1, 1)
        layer.update(kv, kv, {"cache_position": torch.tensor([1])})
        return layer.keys[0, 0, :, 0].tolist() == [0.0, 1.0]
    except Exception:   # noqa: BLE001 - another layer API: set_write_position refuses engine=static
        return False


def set_write_position(cache, n: int) -> None:
    """Where the next forward writes its keys and values: slot n of every layer (the slots past it stay,
    masked, until overwritten). Static layers keep it as a device tensor `cumulative_length`, changed
    in place (a captured CUDA graph reads that same tensor)."""
    layers = getattr(cache, "layers", None)
    if not layers or not all(hasattr(layer, "cumulative_length") for layer in layers):
        from specdec_core.errors import ConfigError

        raise ConfigError("engine=static needs a transformers StaticCache whose layers keep their "
                          "write position (cumulative_length); this transformers has none")
    for layer in layers:
        layer.cumulative_length.fill_(n)
