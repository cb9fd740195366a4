"""How many decoder layers each forward ran, and so who drafted: a cloud forward that ran fewer
than all its layers (early exit, layer skipping) is recorded as the drafter's. Sets
`recording["drafter"]`: "self", "model", "lookup" or "head" (a module handed as `drafter=`,
recorder/observe/head_hooks.py) (docs/recorder.md)."""
from __future__ import annotations

from functools import partial

import torch.nn as nn

from specdec_core.recorder.observe import Observer

SKIP = ("audio", "visual", "vision", "talker", "token2wav", "encoder")


def decoder_layers(model) -> nn.ModuleList | None:
    """The text decoder's layer list: a ModuleList named ...layers as long as the (text) config's
    num_hidden_layers, outside audio / vision towers."""
    cfg = getattr(model, "config", None)
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    n = getattr(text, "num_hidden_layers", None)
    found = [(name.count("."), mod) for name, mod in model.named_modules()      # the outermost
             if isinstance(mod, nn.ModuleList) and name.endswith("layers") and len(mod) == n
             and not any(s in name for s in SKIP)]
    return min(found, key=lambda x: x[0])[1] if found else None


class Depth(Observer):
    """Counts each forward's layers; sets `call.who`, and the recording's `layers` and `drafter`."""

    def __init__(self, recorder):
        super().__init__(recorder)
        self.lists = {r: decoder_layers(m) for r, m in recorder.models.items()}
        self.total = {r: (len(x) if x is not None else None) for r, x in self.lists.items()}
        self.count: dict[str, int | None] = {r: None for r in recorder.models}

    def attach(self) -> list:
        return [layer.register_forward_pre_hook(partial(self._hit, role))    # each model's layers once
                for role, _ in self.r.distinct for layer in (self.lists[role] or ())]

    def _hit(self, role, module, args):
        if self.count[role] is not None:
            self.count[role] += 1

    def pre(self, f, call):
        if self.lists.get(call.role) is not None:
            self.count[call.role] = 0

    def post(self, f, call):
        """The role this forward played: 'edge' for a cloud forward that ran fewer layers."""
        role = call.role
        n, total = self.count.get(role), self.total.get(role)
        self.count[role] = None
        if n is None or not total or n >= total:
            return
        f["depth"] = n
        if role == "cloud" and n > 0:
            f["module"], f["model"] = "cloud", "edge"
            call.who = "edge"

    def finish(self, recording):
        forwards = recording["forwards"]
        recording["layers"] = self.total
        if any(f.get("module") == "head" for f in forwards):
            recording["drafter"] = "head"
        elif any(f.get("module") == "cloud" and f["model"] == "edge" for f in forwards):
            recording["drafter"] = "self"
        else:
            recording["drafter"] = "model" if any(f["model"] == "edge" for f in forwards) else "lookup"
