"""correct.py with an edge that never hears the clip (issue 28: `edge_mishears`).

A common way to "save the edge's audio encoder": the edge drafts from the prompt with the audio
taken out, and only the cloud hears it. On the demo pair the audio IS the prosody tokens of the
prompt, so this edge sees each of them at its middle bin (<pitch_mid> ...) while the cloud sees
the clip's; on Omni the same mistake is a prefill of the edge without `input_features` (what HF
assisted generation does to the assistant model). The output stays the cloud's greedy output
(the cloud verifies everything); what suffers is acceptance, and only on the tokens that depend
on what was heard (the emotion, pitch, pace words).
"""
import torch
from transformers import DynamicCache


def forward(model, cache, ids):
    """Feed `ids` right after what `cache` holds; returns their [n, V] next-token logits."""
    start = cache.get_seq_length()
    x = torch.tensor([ids], dtype=torch.long, device=model.device)
    positions = torch.arange(start, start + len(ids), device=model.device).unsqueeze(0)
    out = model(input_ids=x, past_key_values=cache, position_ids=positions, use_cache=True)
    return out.logits[0]


def without_audio(tokenizer, ids):
    """The prompt as an edge without the audio sees it: every prosody token at its middle bin."""
    middle = {"pitch": "mid", "pvar": "mid", "energy": "mid", "rate": "mid", "pause": "some"}
    out = []
    for i in ids:
        name = tokenizer.convert_ids_to_tokens(i)
        feat = name[1:-1].split("_")[0] if name.startswith("<") and name.endswith(">") else None
        out.append(tokenizer.convert_tokens_to_ids(f"<{feat}_{middle[feat]}>") if feat in middle else i)
    return out


def rollback(cache, keep):
    """Drop everything after the first `keep` positions (transformers 5: crop(-n_removed))."""
    drop = cache.get_seq_length() - keep
    if drop > 0:
        cache.crop(-drop)


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
    stop_ids = {int(s) for s in stop_ids}
    seq = input_ids[0].tolist()                 # committed sequence: prompt + generated
    n_prompt = len(seq)
    edge_cache, cloud_cache = DynamicCache(), DynamicCache()
    edge_seen = cloud_seen = 0                  # how many tokens of seq each cache holds
    edge_prompt = without_audio(tokenizer, seq)  # BUG: the edge never gets the audio

    while True:
        # 1. draft: the edge proposes k tokens greedily, feeding what its cache has not seen
        draft = []
        feed = (edge_prompt + seq[n_prompt:])[edge_seen:]   # BUG: the edge's view of the prompt
        for _ in range(k):
            tok = int(forward(edge, edge_cache, feed)[-1].argmax())
            edge_seen += len(feed)
            draft.append(tok)
            if tok in stop_ids:
                break
            feed = [tok]

        # 2. verify: one cloud forward over its unseen tokens and the whole block
        logits = forward(cloud, cloud_cache, seq[cloud_seen:] + draft)
        target = logits[-(len(draft) + 1):].argmax(-1).tolist()   # cloud's choice at each slot

        # 3. accept while the draft agrees; then the cloud's token (correction or bonus)
        n_ok = 0
        while n_ok < len(draft) and draft[n_ok] == target[n_ok]:
            n_ok += 1
        new = draft[:n_ok] + [target[n_ok]]

        # 4. roll both caches back to what is really committed
        keep = len(seq) + n_ok
        rollback(cloud_cache, keep)
        rollback(edge_cache, keep)
        cloud_seen, edge_seen = keep, min(edge_seen, keep)

        # 5. commit token by token; stop on a stop id or the length limit
        for tok in new:
            seq.append(tok)
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                return seq[n_prompt:]
