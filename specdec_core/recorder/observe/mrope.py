"""Qwen2.5-Omni (and Qwen2-VL-style) models in a recording: 3-row mrope positions, the rope
delta, the audio span, and prefills that carry audio as `input_features` or `inputs_embeds`.
The prompt's positions are recomputed with the model's own `get_rope_index`; omni_checks.py
checks every forward against them (docs/recorder.md, "Qwen2.5-Omni thinkers")."""
from __future__ import annotations

from itertools import groupby

import torch

from specdec_core.recorder.observe import Observer, ints

MM_TOKENS = ("audio_token_index", "audio_token_id", "image_token_index", "image_token_id",
             "video_token_index", "video_token_id")
MM_INPUTS = ("input_features", "pixel_values", "pixel_values_videos")


def split_positions(pos) -> tuple[list | None, list | None]:
    """position_ids as passed -> (text row, three mrope rows), batch row 0. [B, L] and [L] are
    text rows (an mrope model repeats them on its three rows); [3, B, L] are mrope rows;
    [4, B, L] is the text row on top of the three (what `generate` passes)."""
    if not isinstance(pos, torch.Tensor):
        return None, None
    if pos.dim() == 3 and pos.shape[0] in (3, 4):
        rows = [ints(pos[r, 0]) for r in range(pos.shape[0])]
        return (rows[0], rows[1:]) if len(rows) == 4 else (None, rows)
    return ints(pos), None


def ids_of_embeds(model, embeds, prompt: list[int], start: int) -> list[int] | None:
    """The ids an `inputs_embeds` forward fed: each row that is the model's own embedding of an
    id is that id (the prompt's id at that cache position is tried first, then the table is
    searched); a row at a prompt position holding an audio/image placeholder is the encoder's
    and counts as the placeholder. None when a row is neither."""
    table = getattr(model, "get_input_embeddings", lambda: None)()
    if table is None:
        return None
    w, e = table.weight, embeds[0].to(table.weight.device, table.weight.dtype)
    cfg, out = getattr(model, "config", None), []
    mm = {int(v) for n in MM_TOKENS if isinstance(v := getattr(cfg, n, None), int)}   # placeholders
    for j in range(e.shape[0]):
        p = prompt[start + j] if start + j < len(prompt) else None
        if p is not None and (p in mm or torch.equal(w[p], e[j])):
            out.append(p)
            continue
        cand = (w[:, 0] == e[j, 0]).nonzero().flatten().tolist()
        hit = next((c for c in cand if torch.equal(w[c], e[j])), None)
        if hit is None:
            return None
        out.append(hit)
    return out


def multimodal_kwargs(kwargs: dict) -> dict:
    """What get_rope_index needs from a prefill's kwargs: the audio lengths and vision grids."""
    out = {k: kwargs[k] for k in ("image_grid_thw", "video_grid_thw")
           if isinstance(kwargs.get(k), torch.Tensor)}
    fam, lengths = kwargs.get("feature_attention_mask"), kwargs.get("audio_feature_lengths")
    if isinstance(fam, torch.Tensor):
        out["audio_seqlens"] = fam.sum(-1)
    elif isinstance(lengths, torch.Tensor):
        out["audio_seqlens"] = lengths
    return out


def _runs(ids: list[int], token: int) -> list[tuple[int, int]]:
    """[start, end) of every run of `token` in ids."""
    out, i = [], 0
    for v, g in groupby(ids):
        n = len(list(g))
        if v == token:
            out.append((i, i + n))
        i += n
    return out


def prompt_layout(model, prompt: list[int], mm: dict) -> dict | None:
    """{"prompt": three rows of prompt positions, "rope_delta": int, "audio": span | None} from
    the model's own get_rope_index. Without the prefill's feature lengths (an `inputs_embeds`
    prefill) each audio run of n tokens is given the feature length 4n - 1, which the audio
    tower maps back to n tokens."""
    cfg = getattr(model, "config", None)
    audio_id = next((v for n in MM_TOKENS[:2] if isinstance(v := getattr(cfg, n, None), int)), None)
    runs = _runs(prompt, audio_id) if audio_id is not None else []
    kw = dict(mm)
    if runs and "audio_seqlens" not in kw:
        kw["audio_seqlens"] = torch.tensor([4 * (e - s) - 1 for s, e in runs])
    ids = torch.tensor([prompt])
    try:
        pos, delta = model.get_rope_index(input_ids=ids.to(model.device),
                                          attention_mask=torch.ones_like(ids).to(model.device),
                                          **{k: v.to(model.device) for k, v in kw.items()})
    except Exception:           # a config or prompt get_rope_index cannot place: not checked
        return None
    span = [runs[0][0], runs[-1][1]] if runs else None
    return {"prompt": [ints(pos[r, 0]) for r in range(3)],
            "rope_delta": int(delta.reshape(-1)[0]), "audio": span}


class Multimodal(Observer):
    """The prefill's audio lengths / vision grids; the recording's `mrope` and `audio`."""

    def __init__(self, recorder):
        super().__init__(recorder)
        self.mm: dict = {}

    def pre(self, f, call):
        if not self.mm and any(call.kwargs.get(k) is not None for k in MM_INPUTS):
            self.mm = multimodal_kwargs(call.kwargs)

    def finish(self, recording):
        model = next((m for m in (self.r.models["cloud"], self.r.models["edge"])
                      if callable(getattr(m, "get_rope_index", None))), None)      # an mrope model
        layout = prompt_layout(model, self.r.prompt_ids, self.mm) if model is not None else None
        if layout:
            span = layout.pop("audio")
            recording["mrope"] = layout
            prefill = {f["model"]: ("input_features" if f.get("input_features") else "inputs_embeds")
                       for f in recording["forwards"] if f.get("input_features") or f.get("inputs_embeds")}
            recording["audio"] = span and {"span": span, "rope_delta": layout["rope_delta"],
                                           "prefill": prefill}
