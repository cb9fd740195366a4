"""A correct greedy speculative loop on two Qwen2.5-Omni thinkers, written by hand.

The audio enters once, with the first forward of each model (the whole prompt: `input_features`
and `feature_attention_mask` from the Omni processor, which the record CLI passes as
`model_inputs`). Positions are mrope: three rows (time, height, width). For the prompt they come
from the thinker's own `get_rope_index`; every later token at absolute index i sits at
i + rope_delta on all three rows (the delta is 0 for audio-only prompts, non-zero with images or
video). Both caches are cropped after every round; logits are compared on the shared part of the
two heads (Qwen heads are wider than the tokenizer, and the 7B's is wider than the 3B's).
Output equals `cloud.generate(...)` greedy, token for token.
"""
import torch
from transformers import DynamicCache


def mrope_prompt(model, input_ids, model_inputs):
    """The prompt's [3, 1, L] positions and the rope delta, as the thinker computes them."""
    fam = model_inputs.get("feature_attention_mask")
    pos, delta = model.get_rope_index(input_ids=input_ids, attention_mask=torch.ones_like(input_ids),
                                      image_grid_thw=model_inputs.get("image_grid_thw"),
                                      video_grid_thw=model_inputs.get("video_grid_thw"),
                                      audio_seqlens=None if fam is None else fam.sum(-1))
    return pos, int(delta.reshape(-1)[0])


def positions(prompt_pos, delta, start, n):
    """[3, 1, n] positions of absolute indices start..start+n-1."""
    pos = (torch.arange(start, start + n) + delta).view(1, 1, n).repeat(3, 1, 1)
    plen = prompt_pos.shape[-1]
    if start < plen:
        end = min(plen, start + n)
        pos[..., : end - start] = prompt_pos[..., start:end]
    return pos


def forward(model, cache, ids, mrope, audio):
    """Feed `ids` right after what `cache` holds (the audio with the first forward only)."""
    start = cache.get_seq_length()
    x = torch.tensor([ids], dtype=torch.long, device=model.device)
    extra = dict(audio, attention_mask=torch.ones_like(x)) if start == 0 else {}
    pos = positions(*mrope, start, len(ids)).to(model.device)
    out = model(input_ids=x, past_key_values=cache, position_ids=pos, use_cache=True, **extra)
    return out.logits[0]


def rollback(cache, keep):
    drop = cache.get_seq_length() - keep
    if drop > 0:
        cache.crop(-drop)


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(), model_inputs=None):
    audio = dict(model_inputs or {})
    mrope = mrope_prompt(cloud, input_ids, audio)
    shared = min(edge.get_output_embeddings().weight.shape[0], cloud.get_output_embeddings().weight.shape[0])
    stop_ids = {int(s) for s in stop_ids}
    seq = input_ids[0].tolist()
    n_prompt = len(seq)
    edge_cache, cloud_cache = DynamicCache(), DynamicCache()
    edge_seen = cloud_seen = 0

    while True:
        draft, feed = [], seq[edge_seen:]
        for _ in range(k):
            tok = int(forward(edge, edge_cache, feed, mrope, audio)[-1, :shared].argmax())
            edge_seen += len(feed)
            draft.append(tok)
            if tok in stop_ids:
                break
            feed = [tok]

        logits = forward(cloud, cloud_cache, seq[cloud_seen:] + draft, mrope, audio)
        target = logits[-(len(draft) + 1):, :shared].argmax(-1).tolist()

        n_ok = 0
        while n_ok < len(draft) and draft[n_ok] == target[n_ok]:
            n_ok += 1
        new = draft[:n_ok] + [target[n_ok]]

        keep = len(seq) + n_ok
        rollback(cloud_cache, keep)
        rollback(edge_cache, keep)
        cloud_seen, edge_seen = keep, min(edge_seen, keep)

        for tok in new:
            seq.append(tok)
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                return seq[n_prompt:]
