"""Hugging Face prompt lookup decoding: `cloud.generate(prompt_lookup_num_tokens=k)`.

There is no draft model: the candidates are n-grams copied from the context (the prompt and what
was generated so far) after the latest occurrence of the last n tokens; the cloud scores them in
one forward and keeps the longest prefix equal to its own greedy choice. The edge is not used.
Exact: the output equals the cloud's greedy decode. Recorded, the drafts appear only as extra
ids in the cloud's verify forwards (`recording["drafter"] == "lookup"`).
"""
import torch


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(), **kw):
    stops = [int(s) for s in stop_ids]
    out = cloud.generate(input_ids, attention_mask=torch.ones_like(input_ids),
                         prompt_lookup_num_tokens=k, max_matching_ngram_size=2, do_sample=False,
                         max_new_tokens=max_new_tokens, eos_token_id=stops or None,
                         pad_token_id=stops[0] if stops else None)
    return out[0, input_ids.shape[1]:].tolist()
