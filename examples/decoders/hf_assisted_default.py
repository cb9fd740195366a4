"""Hugging Face assisted generation as a user calls it: `cloud.generate(assistant_model=edge)`
with the assistant's default schedule (transformers' "heuristic": the number of drafted tokens
grows by 2 after a fully accepted block and shrinks by 1 otherwise, plus the confidence
threshold that stops drafting early). `k` is ignored: the schedule decides. Exact: the output
equals the cloud's greedy decode.
"""
import torch


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(), **kw):
    stops = [int(s) for s in stop_ids]
    out = cloud.generate(input_ids, attention_mask=torch.ones_like(input_ids),
                         assistant_model=edge, do_sample=False, max_new_tokens=max_new_tokens,
                         eos_token_id=stops or None, pad_token_id=stops[0] if stops else None)
    return out[0, input_ids.shape[1]:].tolist()
