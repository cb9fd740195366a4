"""Adapter: pytorch-labs/gpt-fast, `speculative_decode` and `generate` (generate.py): a static,
preallocated KV cache written at `input_pos` (never cropped: a rejected draft is simply
overwritten at the next round, later positions are masked), sampling with rejection.

Source: https://github.com/pytorch-labs/gpt-fast
Commit: 32971d3129541c5bfb4f715abc33d1c5f408d204 (2024-09-15)
File:   generate.py (functions below copied unchanged unless a line says `# GLUE:`)
Licence: BSD 3-Clause. Copyright 2023 Meta. Copyright (c) Meta Platforms, Inc. and affiliates.
All rights reserved. Redistribution and use in source and binary forms, with or without
modification, are permitted provided that the following conditions are met: 1. Redistributions
of source code must retain the above copyright notice, this list of conditions and the
following disclaimer. 2. Redistributions in binary form must reproduce the above copyright
notice, this list of conditions and the following disclaimer in the documentation and/or other
materials provided with the distribution. 3. Neither the name of the copyright holder nor the
names of its contributors may be used to endorse or promote products derived from this software
without specific prior written permission. THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND
CONTRIBUTORS "AS IS" AND ANY EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR PURPOSE ARE DISCLAIMED. IN NO
EVENT SHALL THE COPYRIGHT HOLDER OR CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL,
SPECIAL, EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO, PROCUREMENT OF
SUBSTITUTE GOODS OR SERVICES; LOSS OF USE, DATA, OR PROFITS; OR BUSINESS INTERRUPTION) HOWEVER
CAUSED AND ON ANY THEORY OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT (INCLUDING
NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE OF THIS SOFTWARE, EVEN IF ADVISED OF
THE POSSIBILITY OF SUCH DAMAGE.

GLUE: gpt-fast runs its own `Transformer(x, input_pos)` with `setup_caches`. `GptFastModel`
below gives a Hugging Face model that interface: a transformers `StaticCache` (preallocated;
transformers 5 appends at its `cumulative_length`, which the glue sets to `input_pos[0]` before
each call, so a write lands AT input_pos as in gpt-fast's KVCache) and `input_pos` passed as
`cache_position` and `position_ids` (the mask hides positions past them). Record with `--set temperature=0.7 --set verify=sampling`.

This is the NEWEST commit, after "Add support for batched generation" (61c193d, 2024-08-29);
`gpt_fast.py` is the same code at the commit before it (e2cfa34), which works at batch 1.

Our reading:
- `speculative_decode` is a correct Leviathan round: draft probs p, target probs q, accept with
  min(1, q/p), residual max(0, q - p) normalised, bonus token sampled from the last target row
  and the last draft fed to the draft model so its cache is complete.
- REAL BUG (batch dimension) in `speculative_decode`: `sample()` now keeps the batch dimension
  (`logits[:, -1]`), so the draft tokens are [k, 1] and `torch.cat([cur_token.view(1),
  draft_tokens])` raises "Tensors must have same number of dimensions" on the first round.
- REAL BUG (batch dimension) in `generate`: `seq` is [batch, T_new] but the speculative branch
  writes `seq[input_pos + 1 : input_pos + num_added + 1] = next_tokens[:num_added]`, slicing the
  BATCH dimension. With batch 1 the slice is empty: it raises a broadcast error as soon as a
  round adds 2+ tokens (or, when every round adds one token, writes nothing and returns the
  uninitialised `torch.empty` buffer). The tokens are right (they reach `callback`), the
  returned sequence is not.
- Neither stops at EOS (`generate` runs max_new_tokens; fine for a benchmark, a bug for a chat).
"""
from typing import Optional, Tuple

import torch
from transformers import StaticCache


class GptFastModel:  # GLUE: the gpt-fast Transformer interface over a Hugging Face model
    def __init__(self, hf_model):  # GLUE
        self.hf = hf_model  # GLUE
        self.cache = None  # GLUE
        self.config = type("Cfg", (), {"block_size": hf_model.config.max_position_embeddings})()  # GLUE

    def setup_caches(self, max_batch_size, max_seq_length):  # GLUE
        self.cache = StaticCache(config=self.hf.config, max_cache_len=max_seq_length)  # GLUE

    def __call__(self, x, input_pos):  # GLUE: Transformer.forward(idx, input_pos) -> logits
        input_pos = input_pos.reshape(-1).long()  # GLUE
        if self.cache.is_initialized:  # GLUE: gpt-fast's KVCache writes AT input_pos; a
            for layer in self.cache.layers:  # GLUE: transformers 5 StaticCache appends at
                layer.cumulative_length.fill_(int(input_pos[0]))  # GLUE: cumulative_length
        out = self.hf(input_ids=x.long(), past_key_values=self.cache, cache_position=input_pos,  # GLUE
                      position_ids=input_pos.unsqueeze(0), use_cache=True)  # GLUE
        return out.logits  # GLUE


Transformer = GptFastModel  # GLUE: the type name in the copied signatures


def multinomial_sample_one_no_sync(probs_sort): # Does multinomial sampling without a cuda synchronization
    q = torch.empty_like(probs_sort).exponential_(1)
    return torch.argmax(probs_sort / q, dim=-1, keepdim=True).to(dtype=torch.int)

def logits_to_probs(logits, temperature: float = 1.0, top_k: Optional[int] = None):
    logits = logits / max(temperature, 1e-5)

    if top_k is not None:
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        pivot = v.select(-1, -1).unsqueeze(-1)
        logits = torch.where(logits < pivot, -float("Inf"), logits)
    probs = torch.nn.functional.softmax(logits, dim=-1)
    return probs

def sample(logits, temperature: float = 1.0, top_k: Optional[int] = None):
    probs = logits_to_probs(logits[:, -1], temperature, top_k)
    idx_next = multinomial_sample_one_no_sync(probs)
    return idx_next, probs

def prefill(model: Transformer, x: torch.Tensor, input_pos: torch.Tensor, **sampling_kwargs) -> torch.Tensor:
    # input_pos: [B, S]
    logits = model(x, input_pos)
    return sample(logits, **sampling_kwargs)[0]

def decode_one_token(model: Transformer, x: torch.Tensor, input_pos: torch.Tensor, **sampling_kwargs) -> Tuple[torch.Tensor, torch.Tensor]:
    # input_pos: [B, 1]
    assert input_pos.shape[-1] == 1
    logits = model(x, input_pos)
    return sample(logits, **sampling_kwargs)

def decode_n_tokens(model: Transformer, cur_token: torch.Tensor, input_pos: torch.Tensor, num_new_tokens: int, callback=lambda _: _, **sampling_kwargs):
    new_tokens, new_probs = [], []
    for i in range(num_new_tokens):
        with torch.backends.cuda.sdp_kernel(enable_flash=False, enable_mem_efficient=False, enable_math=True): # Actually better for Inductor to codegen attention here
            next_token, next_prob = decode_one_token(
                model, cur_token, input_pos, **sampling_kwargs
            )
            input_pos += 1
            new_tokens.append(next_token.clone())
            callback(new_tokens[-1])
            new_probs.append(next_prob.clone())
            cur_token = next_token.clone()

    return new_tokens, new_probs


def model_forward(model, x, input_pos):
    return model(x, input_pos)

def speculative_decode(
    model: Transformer,
    draft_model: Transformer,
    cur_token: torch.Tensor,
    input_pos: int,
    speculate_k: int,
    **sampling_kwargs
) -> torch.Tensor:
    # draft model inference sequentially
    device = cur_token.device
    orig_input_pos = torch.tensor([input_pos], dtype=torch.int64, device=cur_token.device)
    draft_tokens, draft_probs = decode_n_tokens(draft_model, cur_token.view(1, -1), orig_input_pos.clone(), speculate_k, **sampling_kwargs)

    draft_tokens = torch.cat(draft_tokens)
    # parallel inference on target model using draft tokens
    target_logits = model_forward(
        model,
        torch.cat([cur_token.view(1), draft_tokens]).view(1, -1),
        torch.arange(input_pos, input_pos + speculate_k + 1, device=cur_token.device)
    )
    target_probs = logits_to_probs(target_logits[0], **sampling_kwargs)
    draft_probs = torch.stack(draft_probs)
    # q: target prob, p: draft prob
    # q >= p: always accept draft token
    # q < p: q/p prob to accept draft token
    p = draft_probs[torch.arange(0, speculate_k, device=device), draft_tokens]
    q = target_probs[torch.arange(0, speculate_k, device=device), draft_tokens]
    accept_draft_prob = torch.minimum(torch.ones(()), q[:speculate_k]/ p)
    rejected_locations = (torch.rand_like(accept_draft_prob) > accept_draft_prob).nonzero()

    if rejected_locations.shape[0] == 0: # All draft tokens have been accepted
        accept_length = speculate_k + 1
        last_token = multinomial_sample_one_no_sync(target_probs[-1])
        # fill last token into draft model
        model_forward(
            draft_model,
            draft_tokens[-1].view(1, -1),
            orig_input_pos + speculate_k,
        )
        return torch.cat([draft_tokens, last_token])
    else:
        accept_length = rejected_locations[0].item()
        p = draft_probs[accept_length]
        q = target_probs[accept_length]
        new = q - p
        new = torch.where(new > 0, new, 0.0)
        new = new / new.sum()
        next_token = multinomial_sample_one_no_sync(new)
        return torch.cat([draft_tokens[:accept_length], next_token])

@torch.no_grad()
def generate(
    model: Transformer,
    prompt: torch.Tensor,
    max_new_tokens: int,
    batch_size: int,
    *,
    interactive: bool,
    draft_model: Transformer,
    speculate_k: Optional[int] = 8,
    callback = lambda x: x,
    **sampling_kwargs
) -> torch.Tensor:
    """
    Takes a conditioning sequence (prompt) as input and continues to generate as many tokens as requested.
    """

    is_speculative = draft_model is not None
    # create an empty tensor of the expected final shape and fill in the current tokens
    T = prompt.size(-1)
    T_new = T + max_new_tokens
    if interactive:
        max_seq_length = 350
    else:
        max_seq_length = min(T_new, model.config.block_size)

    device, dtype = prompt.device, prompt.dtype
    max_seq_length = max_seq_length + speculate_k + 1 if is_speculative else max_seq_length
    with torch.device(device):
        model.setup_caches(max_batch_size=batch_size, max_seq_length=max_seq_length)
        if is_speculative and draft_model is not model:
            draft_model.setup_caches(max_batch_size=batch_size, max_seq_length=max_seq_length)

    # create an empty tensor of the expected final shape and fill in the current tokens
    empty = torch.empty(batch_size, T_new, dtype=dtype, device=device)
    # We are just making the same prompt for every batch
    prompt = prompt.view(1, -1).repeat(batch_size, 1)
    empty[:, :T] = prompt
    seq = empty
    input_pos = torch.arange(0, T, device=device)

    next_token = prefill(model, prompt.view(batch_size, -1), input_pos, **sampling_kwargs).clone()
    if is_speculative:
        prefill(draft_model, prompt.view(batch_size, -1), input_pos, **sampling_kwargs)
    seq[:, T] = next_token.squeeze()

    input_pos = torch.tensor([T], device=device, dtype=torch.int)
    accept_counts = [0] * (speculate_k + 1)

    if is_speculative:
        input_pos = input_pos.item()  # for speculative decoding easier to keep on host
        while input_pos < T_new - 1:
            cur_token = next_token.view(())

            next_tokens = speculative_decode(
                model, draft_model, cur_token, input_pos, speculate_k, **sampling_kwargs
            )

            accept_counts[len(next_tokens) - 1] += 1
            num_added = min(T_new - input_pos - 1, len(next_tokens))
            seq[input_pos + 1 : input_pos + num_added + 1] = next_tokens[: num_added]
            for i in next_tokens[: num_added,]:
                callback(i)
            input_pos = input_pos + num_added
            next_token = next_tokens[-1]
    else:
        generated_tokens, _ = decode_n_tokens(model, next_token.view(batch_size, -1), input_pos, max_new_tokens - 1, callback=callback, **sampling_kwargs)
        seq[:, T + 1:] = torch.cat(generated_tokens, dim=-1)

    generate_stats = {
        'accept_counts': accept_counts
    }
    return seq, generate_stats

# ---- GLUE: the recorder's FUNCTION signature -------------------------------------------------
def _check(temperature):  # GLUE
    if not temperature or temperature <= 0:  # GLUE
        raise ValueError("gpt-fast samples: declare --set temperature=T (> 0) --set verify=sampling")  # GLUE


def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(), temperature=0.8, **kw):  # GLUE
    """gpt-fast's own generate() with a draft model."""  # GLUE
    _check(temperature)  # GLUE
    prompt = input_ids[0]  # GLUE
    seq, _stats = generate(GptFastModel(cloud), prompt, max_new_tokens, batch_size=1, interactive=False,  # GLUE
                           draft_model=GptFastModel(edge), speculate_k=k, temperature=temperature, top_k=None)  # GLUE
    return seq[0, prompt.numel():].tolist()  # GLUE
