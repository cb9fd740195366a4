"""`reordered_rows.py` with one bug: after the reorder, the per-row counts (`seq_lens`, how many
ids each row holds) are left in the OLD order, so each slot's padding mask and positions are
another row's (vllm #14645: penalties' counts applied in the old order after the batch was
condensed; #45100: stale accepted counts). `diff reordered_rows.py
reordered_rows_stale_counts.py` shows the whole bug.

Below: the correct file's docstring.

Batched speculative decoding whose rows are REORDERED between steps, as engines condense
their batches (a finished or preempted row's slot is refilled, rows sorted): every step the rows
move one slot over, with their tokens, both caches and their per-row counts (issue 48, item 3;
vllm-project/vllm #14645 and #45100 are bugs where counts were applied in the old order after
such a reorder). The correct loop: every row is still its own greedy decode. Its buggy twin is
`reordered_rows_stale_counts.py`.

Adapted from examples/decoders/batched/lucidrains_batched.py (its header follows), with the
reorder step added here (`reorder`, `order`; no code copied from vLLM).

Batched speculative decoding, adapted from lucidrains/speculative-decoding to the demo pair.

Source: https://github.com/lucidrains/speculative-decoding, commit
72171ac91cd040ad6b67c186ac985e4f50a0c269, speculative_decoding/speculative_decoding.py
(`speculative_decoding`, its sampling helpers and the Decoder's `seq_start_pos` mask).
MIT License, Copyright (c) 2023 Phil Wang (the licence text is at the end of this file).

What is kept: the loop itself (gamma drafts per step sampled with gumbel noise from a top-k
filtered distribution, one verify forward per step, the first-rejection index, the adjusted
distribution relu(p - q), the next token by multinomial), the batch layout (left padding,
per-row `seq_lens`, `seq_start_pos = out.shape[-1] - seq_lens`), and the realignment each step
(every row right-aligned by its own number of rejected drafts, out and both caches gathered with
`seq_offset_indices`, the small cache one token behind). What is adapted: the models are Hugging
Face causal LMs, so `net(...)` feeds what the cache has not seen with the padding mask and each
row's positions (keys are cached after rotary here, lucidrains caches them before it), the cache
is a transformers DynamicCache gathered layer by layer, `rearrange` is written out (no einops),
prompts of different lengths start left-padded, and rows stop on the stop ids. temperature = 0
(the default here) makes every sample the argmax: the loop is greedy and each row equals its
own greedy decode.

Three prompts run in one batch: the clip's and two built from it (without the system turn; with
the condition tokens repeated). `row` says where the clip's prompt sits (0, 1 or 2); the return
value is the clip's row, as the record contract asks.
"""
import math

import torch
import torch.nn.functional as F
from transformers import DynamicCache

# helper functions


def exists(val):
    return val is not None


def default(val, d):
    return val if exists(val) else d

# sampling helpers


def log(t, eps=1e-20):
    return torch.log(t.clamp(min=eps))


def gumbel_noise(t):
    noise = torch.zeros_like(t).uniform_(0, 1)
    return -log(-log(noise))


def gumbel_sample(t, temperature=1., dim=-1):
    return ((t / max(temperature, 1e-10)) + gumbel_noise(t)).argmax(dim=dim)


def top_k(logits, thres=0.9):
    k = math.ceil((1 - thres) * logits.shape[-1])
    val, ind = torch.topk(logits, k)
    probs = torch.full_like(logits, float('-inf'))
    probs.scatter_(-1, ind, val)
    return probs


def safe_div(num, den, eps=1e-10):
    return num / max(den, eps)


def find_first_true_index(bool_tensor, dim=-1):
    return (bool_tensor.cumsum(dim=dim) == 0).sum(dim=dim)

# the Decoder's call convention on a Hugging Face model


def net(model, out, seq_start_pos=None, cache=None, return_cache=True):
    """lucidrains' `net(out, seq_start_pos=..., cache=..., return_cache=True)`: the whole padded
    sequence in, only what the cache has not seen fed, left padding masked by seq_start_pos."""
    batch, seq_len = out.shape
    seq_range = torch.arange(seq_len, device=out.device, dtype=torch.long)
    self_attn_kv_mask = seq_range >= seq_start_pos[..., None]
    cache = default(cache, DynamicCache())
    num_cached = cache.get_seq_length()
    positions = (self_attn_kv_mask.long().cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=out[:, num_cached:], attention_mask=self_attn_kv_mask.long(),
                   position_ids=positions[:, num_cached:], past_key_values=cache,
                   use_cache=True).logits
    return (logits, cache) if return_cache else logits


def realign(cache, batch_range, seq_offset_indices, one_behind=False):
    """cached_kv[batch_range, seq_offset_indices] on every layer's keys and values, in place."""
    for layer in cache.layers:
        for name in ("keys", "values"):
            kv = getattr(layer, name)
            if one_behind:
                kv = F.pad(kv, (0, 0, 0, 1))  # account for small model being a token behind
            kv = kv.transpose(1, 2)                              # b h n d -> b n h d
            kv = kv[batch_range, seq_offset_indices]
            kv = kv.transpose(1, 2)                              # b n h d -> b h n d
            if one_behind:
                kv = kv[..., :-1, :]
            setattr(layer, name, kv.contiguous())


def reorder(cache, perm):
    """The engine's condense step on a cache: every layer's rows moved to their new slots."""
    for layer in cache.layers:
        layer.keys, layer.values = layer.keys[perm].contiguous(), layer.values[perm].contiguous()


def offsets(seq_arange, num_rejected):
    """Each row's source column for every kept column: right-aligned by its own rejections."""
    return seq_arange - num_rejected[..., None]

# speculative decoding


@torch.no_grad()
def speculative_decoding(net_small, net_large, prompts, seq_len, gamma=5, temperature=0.,
                         filter_thres=0.9, lenience=1., pad_id=0, stop_ids=()):
    """eq. algorithm 1 in paper https://arxiv.org/abs/2211.17192 (prompts: one list per row)"""
    batch, device = len(prompts), net_large.device
    prompt_seq_len = max(len(p) for p in prompts)
    out = torch.tensor([[pad_id] * (prompt_seq_len - len(p)) + list(p) for p in prompts],
                       device=device)
    prompt_lens = torch.tensor([len(p) for p in prompts], device=device)
    stops = torch.tensor(sorted(stop_ids) or [-1], device=device)

    cache = None
    small_cache = None

    batch_range = torch.arange(batch, device=device, dtype=torch.long)[..., None]
    seq_lens = prompt_lens.clone()
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    order = torch.arange(batch, device=device)          # which prompt each slot holds

    while ((seq_lens < prompt_lens + seq_len) & ~done).any():

        # predict with smaller network

        all_small_logits = []
        q_sampled_out = []

        for _ in range(gamma):
            small_logits, small_cache = net(net_small, out, seq_start_pos=out.shape[-1] - seq_lens,
                                            cache=small_cache, return_cache=True)

            small_logits = small_logits[:, -1]

            small_logits = top_k(small_logits, thres=filter_thres)
            all_small_logits.append(small_logits)

            sample = gumbel_sample(small_logits, temperature=temperature, dim=-1)
            out = torch.cat((out, sample[..., None]), dim=-1)
            seq_lens += 1

            q_sampled_out.append(sample[:, None, None])

        q_sampled_out = torch.cat(q_sampled_out, dim=-2)
        small_logits = torch.stack(all_small_logits, dim=-2)

        # verify with larger network

        logits, cache = net(net_large, out, seq_start_pos=out.shape[-1] - seq_lens,
                            cache=cache, return_cache=True)

        logits = logits[..., -(gamma + 1):, :]
        logits = top_k(logits, thres=filter_thres)

        # prob and prob of small model (p(x) and q(x) in algorithm 1)

        prob = safe_div(logits, temperature).softmax(dim=-1)
        small_prob = safe_div(small_logits, temperature).softmax(dim=-1)

        p, prob_next = prob[:, :-1], prob[:, -1]

        p = p.gather(-1, q_sampled_out)
        q = small_prob.gather(-1, q_sampled_out) * lenience

        p, q = p[..., 0], q[..., 0]

        r = torch.zeros_like(q).float().uniform_(0, 1)

        accepted = find_first_true_index(r > (p / q))

        num_rejected = gamma - accepted
        has_rejected = num_rejected > 0

        # a row stops at the first stop id it accepts
        block = q_sampled_out[..., 0]
        hit = torch.isin(block, stops) & (torch.arange(gamma, device=device) < accepted[:, None])

        accepted = accepted[:, None]
        accepted.clamp_(max=gamma - 1)
        adjusted_prob = F.relu(prob[batch_range, accepted] - small_prob[batch_range, accepted])
        adjusted_prob = adjusted_prob / adjusted_prob.sum(dim=-1, keepdim=True)
        adjusted_prob = adjusted_prob[:, 0]

        prob_next = torch.where(has_rejected[:, None], adjusted_prob, prob_next)

        # do a bunch of slicing and align everything to the right, including kv caches

        seq_lens -= num_rejected
        max_seq_len = seq_lens.amax()
        curr_len = out.shape[-1]

        seq_arange = torch.arange(max_seq_len, device=device, dtype=torch.long) + (curr_len - max_seq_len)
        seq_offset_indices = offsets(seq_arange, num_rejected)

        out = out[batch_range, seq_offset_indices]
        realign(cache, batch_range, seq_offset_indices)
        realign(small_cache, batch_range, seq_offset_indices, one_behind=True)

        # sample the additional token, one of the tricks in the paper to better bound the worst case

        next_token = torch.multinomial(prob_next, 1)

        done |= hit.any(-1) | torch.isin(next_token[:, 0], stops)
        out = torch.cat((out, next_token), dim=-1)
        seq_lens += 1

        # the batch is condensed: every row moves one slot over, with its tokens, caches and counts

        perm = torch.roll(torch.arange(batch, device=device), 1)
        out, prompt_lens, done, order = out[perm], prompt_lens[perm], done[perm], order[perm]
        # BUG: the per-row counts stay in the old order (vllm #14645 / #45100)
        reorder(cache, perm)
        reorder(small_cache, perm)

    # now left align

    num_pad_left = out.shape[-1] - seq_lens
    rows = [None] * batch
    for b in range(batch):
        rows[int(order[b])] = out[b, int(num_pad_left[b]) + int(prompt_lens[b]):].tolist()
    return [_until_stop(r, stop_ids, seq_len) for r in rows]


def _until_stop(ids, stop_ids, n):
    for i, t in enumerate(ids[:n]):
        if t in stop_ids:
            return ids[:i + 1]
    return ids[:n]


def batch_prompts(tokenizer, prompt, row):
    """The clip's prompt at `row` among two built from it: without the system turn (shorter),
    with the condition tokens written twice (longer)."""
    toks = tokenizer.convert_ids_to_tokens(prompt)
    end = toks.index("<|im_end|>") if "<|im_end|>" in toks else -1
    no_system = prompt[end + 2:] if end >= 0 else prompt[1:]
    cond = [i for i, t in zip(prompt, toks) if t.startswith("<") and not t.startswith("<|")]
    at = prompt.index(cond[0]) if cond else len(prompt) // 2
    twice = prompt[:at] + cond + prompt[at:]
    others = [no_system, twice]
    return others[:row] + [prompt] + others[row:]


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(), row=1,
           temperature=0.):
    prompts = batch_prompts(tokenizer, input_ids[0].tolist(), row)
    outs = speculative_decoding(edge, cloud, prompts, max_new_tokens, gamma=k,
                                temperature=temperature, stop_ids={int(s) for s in stop_ids})
    return outs[row]


def decode_row0(edge, cloud, tokenizer, input_ids, **kw):
    return decode(edge, cloud, tokenizer, input_ids, **{**kw, "row": 0})


def decode_row2(edge, cloud, tokenizer, input_ids, **kw):
    return decode(edge, cloud, tokenizer, input_ids, **{**kw, "row": 2})


# MIT License
#
# Copyright (c) 2023 Phil Wang
#
# Permission is hereby granted, free of charge, to any person obtaining a copy
# of this software and associated documentation files (the "Software"), to deal
# in the Software without restriction, including without limitation the rights
# to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
# copies of the Software, and to permit persons to whom the Software is
# furnished to do so, subject to the following conditions:
#
# The above copyright notice and this permission notice shall be included in all
# copies or substantial portions of the Software.
#
# THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
# IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
# FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
# AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
# LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
# OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
# SOFTWARE.
