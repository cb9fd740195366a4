"""A correct greedy speculative loop that is slow for a reason outside the models.

`correct.py` plus a live chat display written the naive way: after EVERY drafted token it
rebuilds the display from scratch: each token's text as the difference of two prefix decodes
(for per-token colouring), and every prefix of the conversation and of the reply decoded to find the
longest one made of whole characters (so that a half-decoded multi-byte character is never
shown in the chat pane or the reply box).
That is quadratic in the text length and runs once per drafted token, also for drafts that are
rejected a moment later. The output is right (equal to the cloud's greedy decode); the time is
spent between the forwards, which the recorder reports as `loop_overhead`.

Fix: decode once at the end, or only the newly committed tokens (transformers' TextStreamer).
"""
import torch
from transformers import DynamicCache


def forward(model, cache, ids):
    start = cache.get_seq_length()
    x = torch.tensor([ids], dtype=torch.long, device=model.device)
    positions = torch.arange(start, start + len(ids), device=model.device).unsqueeze(0)
    out = model(input_ids=x, past_key_values=cache, position_ids=positions, use_cache=True)
    return out.logits[0]


def rollback(cache, keep):
    drop = cache.get_seq_length() - keep
    if drop > 0:
        cache.crop(-drop)


def whole_characters(tokenizer, ids):
    """The longest prefix of `ids` that decodes without a half character (U+FFFD)."""
    stable = ""
    for j in range(1, len(ids) + 1):                            # SLOW: every prefix, every time
        text = tokenizer.decode(ids[:j])
        if "\ufffd" not in text:
            stable = text
    return stable


def show(tokenizer, ids, n_prompt):  # SLOW: the whole display, from scratch, every token
    # per-token colouring: each token's text as the difference of two prefix decodes, so a
    # token that completes a multi-byte character gets that character
    pieces = [tokenizer.decode(ids[:j + 1])[len(tokenizer.decode(ids[:j])):] for j in range(len(ids))]
    chat = whole_characters(tokenizer, ids)                      # the chat pane: conversation
    reply = whole_characters(tokenizer, ids[n_prompt:])          # the reply box
    return pieces, chat, reply


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
    stop_ids = {int(s) for s in stop_ids}
    seq = input_ids[0].tolist()
    n_prompt = len(seq)
    edge_cache, cloud_cache = DynamicCache(), DynamicCache()
    edge_seen = cloud_seen = 0
    screen = None

    while True:
        draft = []
        feed = seq[edge_seen:]
        for _ in range(k):
            tok = int(forward(edge, edge_cache, feed)[-1].argmax())
            edge_seen += len(feed)
            draft.append(tok)
            screen = show(tokenizer, seq + draft, n_prompt)     # SLOW: every drafted token
            if tok in stop_ids:
                break
            feed = [tok]

        logits = forward(cloud, cloud_cache, seq[cloud_seen:] + draft)
        target = logits[-(len(draft) + 1):].argmax(-1).tolist()

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
            screen = show(tokenizer, seq, n_prompt)              # SLOW: every committed token
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                return seq[n_prompt:]
