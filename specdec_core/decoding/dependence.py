"""Audio dependence per token: KL(p_with || p_without) in nats, the cloud's next-token
distribution with and without the clip (`Backend.counterfactual_inputs`), teacher-forced over
the run's own output in one extra forward after the decode, never inside a round
(docs/metrics.md, "Audio dependence")."""
from __future__ import annotations

import time

import torch


def _batch_kwargs(a: dict, b: dict) -> dict:
    """Stack two prompts' extra model inputs (Omni: input_features, feature_attention_mask)."""
    ok = all(isinstance(va, torch.Tensor) and isinstance(b.get(k), torch.Tensor) and va.shape == b[k].shape
             for k, va in a.items())
    return {k: torch.cat([va, b[k]], dim=0) for k, va in a.items()} if ok else {}


def _logits(model, rows: list[tuple[torch.Tensor, dict]], width: int | None) -> list[torch.Tensor]:
    """[T, V] float32 logits of each (ids [1, T], extra kwargs) row; one forward when they stack."""
    dev = next(model.parameters()).device
    ids = [r[0].to(dev) for r in rows]
    extra = _batch_kwargs(rows[0][1], rows[1][1]) if len(rows) == 2 else {}
    if len(rows) == 2 and ids[0].shape == ids[1].shape and (extra or not rows[0][1]):
        x = torch.cat(ids, dim=0)
        out = model(input_ids=x, attention_mask=torch.ones_like(x), use_cache=False, **extra)
        logits = list(out.logits)
    else:
        logits = [model(input_ids=x, attention_mask=torch.ones_like(x), use_cache=False, **r[1]).logits[0]
                  for x, r in zip(ids, rows)]
    return [lg[:, :width].float() if width else lg.float() for lg in logits]


@torch.inference_mode()
def audio_dependence(backend, prompt, token_ids: list[int]) -> dict | None:
    """{"values": [nats per generated token], "audio_free_ids": [the cloud's argmax without the
    audio], "seconds", "forwards", "method"} or None when the
    backend cannot take the audio away (text backends, a cloud behind a server)."""
    if isinstance(token_ids, torch.Tensor):
        token_ids = token_ids.reshape(-1).tolist()
    if not token_ids or getattr(backend, "cloud", None) is None:
        return None
    try:                     # the backend's prompt without the audio
        cf = backend.counterfactual_inputs(prompt) if hasattr(backend, "counterfactual_inputs") else None
    except NotImplementedError:
        return None
    if cf is None:
        return None
    t0 = time.perf_counter()
    gen = torch.tensor([token_ids[:-1]], dtype=torch.long)
    rows = [(torch.cat([p.input_ids.cpu(), gen], dim=1), dict(p.prefill_kwargs)) for p in (prompt, cf)]
    with_a, without = _logits(backend.cloud, rows, backend.shared_vocab)
    n = len(token_ids)
    lp = torch.log_softmax(with_a[prompt.length - 1: prompt.length - 1 + n], dim=-1)
    lq = torch.log_softmax(without[cf.length - 1: cf.length - 1 + n], dim=-1)
    kl = (lp.exp() * (lp - lq)).sum(-1).clamp_min(0.0)
    stacked = rows[0][0].shape == rows[1][0].shape
    return {"values": [round(float(v), 5) for v in kl.cpu()],
            # what the cloud would say at each position without the audio (edge_mishears asks
            # whether the edge's rejected drafts are these: an edge that never got the audio)
            "audio_free_ids": lq.argmax(-1).tolist(),
            "seconds": round(time.perf_counter() - t0, 4), "forwards": 1 if stacked else 2,
            "method": cf.info.get("counterfactual", "audio removed")}
