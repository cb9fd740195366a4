"""An EAGLE-style draft head for the demo cloud (issue 35).

One Qwen2 decoder layer over fc(concat(cloud feature at t, embedding of token t+1)); its output
is a predicted cloud feature for position t+1, read out by the cloud's own (frozen) LM head.
The head owns only `fc` and the layer (+ its final norm)."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn
from transformers import Qwen2Config, Qwen2Model

from specdec_core.compat import with_cache


class DraftHead(nn.Module):
    """fc + one decoder layer; forward(features, token_embeds) -> predicted features."""

    def __init__(self, config: Qwen2Config):
        super().__init__()
        self.config = config
        h = config.hidden_size
        self.fc = nn.Linear(2 * h, h, bias=True)
        self.body = Qwen2Model(config)
        self.body.embed_tokens = None  # the cloud's embeddings are used; none of its own

    def forward(self, features, token_embeds, cache=None, position_ids=None, attention_mask=None):
        x = self.fc(torch.cat([features, token_embeds.to(features.dtype)], dim=-1))
        kw = with_cache(self.body, cache) if cache is not None else {}
        out = self.body(inputs_embeds=x, position_ids=position_ids, attention_mask=attention_mask,
                        use_cache=cache is not None, **kw)
        return out.last_hidden_state

    def step(self, cloud, features, next_ids, cache=None, position_ids=None):
        """Features of positions t.., tokens at t+1.. -> (cloud-LM-head logits, new features)."""
        emb = cloud.get_input_embeddings()(next_ids)
        feats = self(features, emb, cache=cache, position_ids=position_ids)
        return cloud.get_output_embeddings()(feats), feats

    def save(self, folder: str | Path) -> None:
        from safetensors.torch import save_file
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        state = {k: v.contiguous() for k, v in self.state_dict().items()}
        save_file(state, str(folder / "model.safetensors"))
        (folder / "config.json").write_text(self.config.to_json_string())

    @classmethod
    def from_pretrained(cls, folder: str | Path, dtype=None) -> "DraftHead":
        from safetensors.torch import load_file
        folder = Path(folder)
        cfg = Qwen2Config(**json.loads((folder / "config.json").read_text()))
        head = cls(cfg)
        head.load_state_dict(load_file(str(folder / "model.safetensors")))
        head.eval()
        return head.to(dtype) if dtype is not None else head
