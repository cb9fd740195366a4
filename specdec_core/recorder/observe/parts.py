"""Observe a model called through its parts (issue 41; docs/recorder.md, "How it records"): the
inner model (`model.model(...)`), then the LM head (`model.lm_head(hidden)`), as EAGLE's official
loop calls its verifier. The inner model's pre hook records the inputs (`"call": "parts"`) and the
LM head's output completes it; an inner call never read out is completed without rows."""
from __future__ import annotations

from functools import partial

import torch
from torch import nn

from specdec_core.recorder.observe import Observer


class _Out(dict):
    """What the Recorder's post hook reads: `.logits` and the cache (compat.output_cache)."""
    __getattr__ = dict.get


def inner_model(model) -> nn.Module | None:
    base = getattr(model, "base_model_prefix", None)
    inner = getattr(model, base, None) if base else None
    return inner if isinstance(inner, nn.Module) and inner is not model else None


def lm_head(model) -> nn.Module | None:
    try:
        head = model.get_output_embeddings()
    except Exception:
        return None
    return head if isinstance(head, nn.Module) else None


class Parts(Observer):
    def __init__(self, recorder):
        super().__init__(recorder)
        self.waiting = None          # (role, module, args, kwargs, output) of a direct inner call
        self.skip: list[bool] = []   # per running inner call: inside a top-level forward

    def attach(self) -> list:
        handles = []
        for role, m in self.r.distinct:
            inner, head = inner_model(m), lm_head(m)
            handles.append(m.register_forward_pre_hook(lambda *_: self.close(), prepend=True))
            if inner is None or head is None:
                continue
            handles += [inner.register_forward_pre_hook(partial(self._pre, role), with_kwargs=True),
                        inner.register_forward_hook(partial(self._post, role), with_kwargs=True),
                        head.register_forward_hook(partial(self._logits, role))]
        if self.r.drafter is not None:
            handles.append(self.r.drafter.register_forward_pre_hook(lambda *_: self.close(), prepend=True))
        return handles

    def close(self) -> None:
        """Complete a direct inner call whose LM head was not (or not yet) seen: no rows."""
        if self.waiting is not None:
            self._finish(None)

    def _finish(self, logits) -> None:
        role, module, args, kwargs, output = self.waiting
        self.waiting = None
        out = _Out(output) if isinstance(output, dict) else _Out()
        out["logits"] = logits
        self.r._post(role, module, args, kwargs, out)

    def _pre(self, role, module, args, kwargs):
        self.close()
        inside = bool(self.r._pending.get(role))       # a top-level forward is running
        self.skip.append(inside)
        if not inside:
            self.r._pre(role, module, args, kwargs)
            self.r.forwards[-1]["call"] = "parts"

    def _post(self, role, module, args, kwargs, output):
        if self.skip and not self.skip.pop():
            self.waiting = (role, module, args, kwargs, output)

    def _logits(self, role, _module, args, output):
        if self.waiting is None or self.waiting[0] != role or not isinstance(output, torch.Tensor):
            return
        if _trailing(self.waiting[4], args[0] if args else None):
            logits = output.detach()
            self._finish(logits if logits.dim() == 3 else logits[:, None])


def _trailing(output, hidden) -> int:
    """How many trailing rows of the inner call's last hidden state the LM head was applied to
    (all of them, or the last m, [B, m, H], or the last one, [B, H]); 0 for anything else (a
    gather of tree paths, another tensor): those logits are not the forward's rows."""
    last = output.get("last_hidden_state") if isinstance(output, dict) else (
        output[0] if isinstance(output, tuple) and output else None)
    if not isinstance(hidden, torch.Tensor) or not isinstance(last, torch.Tensor) or last.dim() != 3:
        return 0
    h = hidden[:, None] if hidden.dim() == 2 else hidden
    if h.dim() != 3 or h.shape[0] != last.shape[0] or not 0 < h.shape[1] <= last.shape[1]:
        return 0
    return h.shape[1] if torch.equal(h, last[:, last.shape[1] - h.shape[1]:]) else 0
