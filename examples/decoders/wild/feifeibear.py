"""Adapter: feifeibear/LLMSpeculativeSampling, `speculative_sampling` (Google/Leviathan
version, KV cache kept as legacy tuples and rolled back by slicing tensors) and
`speculative_sampling_v2` (DeepMind/Chen version, no KV cache: every forward re-runs the whole
sequence).

Source: https://github.com/feifeibear/LLMSpeculativeSampling
Commit: 59a209d37b2e463459057a784f8bd31c1136a58b (2024-08-22)
Files:  sampling/utils.py, sampling/kvcache_model.py, sampling/speculative_sampling.py
Licence: Apache License 2.0. Copyright 2024 feifeibear (Jiarui Fang). You may obtain a copy of
the License at http://www.apache.org/licenses/LICENSE-2.0. Distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND. Modified by SpecScope: the three files are joined
into one, long docstrings are shortened, and every changed or added line is marked `# GLUE:`;
nothing else was changed.

What it does: samples only (temperature > 0). Record it as
    python -m specdec_core record examples/decoders/wild/feifeibear.py:decode CLIP \
        --set temperature=0.7 --set verify=sampling
(`decode_v2` for the cache-free version).

Our reading (docs in examples/decoders/README.md, "Decoders from public code"):
- The rejection rule, the residual max(0, p - q) and the bonus token are right in both.
- REAL BUG (stopping): neither version looks at EOS/stop ids; they run until max_len tokens,
  and overshoot it by up to gamma tokens (`while prefix.shape[1] < T` adds 1..gamma+1).
- REAL BUG (sampling): `sample()` raises RuntimeError whenever token id 0 is drawn. On Qwen
  tokenizers id 0 is "!", an ordinary token; on the demo tokenizer it is <|endoftext|>.
- The draft cache rollback (`rollback(n+1)`) is right; the slicing is Bloom/llama-layout only.
"""
import torch
from torch.nn import functional as F
from transformers.models.bloom.modeling_bloom import BloomForCausalLM

from _legacy import LegacyCacheModel  # GLUE: transformers-4 tuple caches on transformers 5

tqdm = None  # GLUE: v2's progress bar (tqdm) replaced by a no-op below
Decoder = None  # GLUE: globals.Decoder is only used with verbose=True (never here)


# ---- sampling/utils.py ------------------------------------------------------------------------
# copy from https://github.com/LeeSinLiang/microGPT/blob/ed40cf9780dbeb180adfe94c227d4aa97e69250e/gpt.py
def top_k_top_p_filter(logits: torch.Tensor, top_k: int = 0, top_p: float = 0.0):
    if top_k > 0:
        filter = torch.topk(logits, min(top_k, logits.size(-1)))[0]
        logits[logits < filter[:, [-1]]] = float('-inf')
    if top_p > 0.0:
        sorted_logits, sorted_indices = torch.sort(logits, descending=True)
        cumulative_probs = torch.cumsum(
            F.softmax(sorted_logits, dim=-1), dim=-1)
        filter = cumulative_probs > top_p
        filter[..., 1:] = filter[..., :-1].clone()
        filter[..., 0] = 0
        indices_to_remove = filter.scatter(1, sorted_indices, filter)
        logits[indices_to_remove] = float('-inf')
    return logits


def norm_logits(logits : torch.Tensor, temperature : float, top_k : float, top_p : float) -> torch.Tensor:
    assert logits.dim() == 2
    logits = logits / temperature
    logits = top_k_top_p_filter(logits, top_k=top_k, top_p=top_p)
    probs = F.softmax(logits, dim=1)
    return probs


def sample(probs : torch.Tensor, num_samples: int = 1):
    idx_next = torch.multinomial(probs, num_samples=num_samples)
    if (idx_next.item() == 0):
        raise RuntimeError
    return idx_next


def max_fn(x):
    """
        norm(max (x, 0))
    """
    x_max = torch.where(x > 0, x, torch.zeros_like(x))
    x_max_sum = torch.sum(x_max, dim=1, keepdim=True)
    return x_max / x_max_sum


# ---- sampling/kvcache_model.py ----------------------------------------------------------------
def _debug_show_kvcache(past_key_values):
    if  past_key_values is None:
        return
    for elem in past_key_values:
        k, v = elem
        print(f"kv cache: k shape {k.shape}, v shape {v.shape}")
        break

class KVCacheModel():
    def __init__(self, model : torch.nn.Module, temperature : float = 1, top_k : int = 0, top_p : float = 0) -> None:
        self._model = model
        self._past_key_values = None
        self._prob_history = None

        self._temperature = temperature
        self._top_k = top_k
        self._top_p = top_p

    def _forward_with_kvcache(self, input_ids : torch.Tensor, use_debug = True) -> torch.Tensor:
        if self._past_key_values is None:
            assert self._prob_history is None, f"{self._prob_history.shape}"
            # the first forward (prefill) returns the prompt's logits
            outputs = self._model(input_ids)
            self._prob_history = outputs.logits
            for i in range(self._prob_history.shape[-2]):
                self._prob_history[:, i, :] = norm_logits(self._prob_history[:, i, :], self._temperature, self._top_k, self._top_p)
            self._past_key_values = outputs.past_key_values
            last_q = self._prob_history[:, -1, :]
        else:
            # return the last token's logits
            cached_len = 0
            for kv in self._past_key_values:
                k, v = kv
                cached_len = k.shape[2]

            last_input_id = input_ids[:, cached_len:]
            if last_input_id.dim() == 1:
                last_input_id = torch.unsqueeze(last_input_id, 0)

            if use_debug:
                print(f"last_input_id shape {last_input_id.shape}")
                _debug_show_kvcache(self._past_key_values)

            outputs = self._model(last_input_id, past_key_values=self._past_key_values, use_cache=True)

            not_cached_q = outputs.logits
            if not_cached_q.dim() == 2:
                not_cached_q = torch.unsqueeze(not_cached_q, 0)

            for i in range(not_cached_q.shape[-2]):
                not_cached_q[:, i, :] = norm_logits(not_cached_q[:, i, :], self._temperature, self._top_k, self._top_p)

            self._prob_history = torch.cat([self._prob_history, not_cached_q], dim=1)

            last_q = not_cached_q[:, -1, :]
            self._past_key_values = outputs.past_key_values

        return last_q


    def _generate_with_kvcache(self, prefix : torch.Tensor,
                                    gamma : int,
                                    use_debug = False) -> torch.Tensor:
        x = prefix

        for _ in range(gamma):
            q = self._forward_with_kvcache(x, use_debug)
            next_tok = sample(q)
            x = torch.cat((x, next_tok), dim=1)
        return x

    @torch.no_grad()
    def generate(self, input : torch.Tensor, gamma : int) -> torch.Tensor:
        output = self._generate_with_kvcache(input, gamma)
        return output

    @torch.no_grad()
    def rollback(self, end_pos : int):
        past_key_values_trimmed = []
        assert self._past_key_values
        for kv in self._past_key_values:
            k, v = kv
            # NOTE() the indexing is specific for bloom. This won't work for other models
            # For example llama k, v should be (batch, num_head, seq_len, hidden_dim)

            # Bloom is special one
            if isinstance(self._model, BloomForCausalLM):
                # k (batch * head, hidden_dim, seq); v (batch * head, seq, hidden_dim)
                k = k[:, :, :end_pos]
                v = v[:, :end_pos, :]
                kv_trimmed = (k, v)
                past_key_values_trimmed.append(kv_trimmed)
            else:
                # k, v (batch, head, seq, hidden_dim)
                k = k[:, :, :end_pos, :]
                v = v[:, :, :end_pos, :]
                kv_trimmed = (k, v)
                past_key_values_trimmed.append(kv_trimmed)

        self._past_key_values = past_key_values_trimmed
        self._prob_history = self._prob_history[:, :end_pos, :]


# ---- sampling/speculative_sampling.py ---------------------------------------------------------
@torch.no_grad()
def speculative_sampling(prefix : torch.Tensor, approx_model : torch.nn.Module, target_model : torch.nn.Module,
                         max_len : int , gamma : int = 4,
                         temperature : float = 1, top_k : int = 0, top_p : float = 0, verbose : bool = False, random_seed : int = None) -> torch.Tensor:
    """
    Google version Speculative Sampling.
    https://arxiv.org/pdf/2211.17192.pdf

    Adapted with KV Cache Optimization.
    """
    seq_len = prefix.shape[1]
    T = seq_len + max_len

    assert prefix.shape[0] == 1, "input batch size must be 1"

    assert approx_model.device == target_model.device

    device = target_model.device

    approx_model_cache = KVCacheModel(approx_model, temperature, top_k, top_p)
    target_model_cache = KVCacheModel(target_model, temperature, top_k, top_p)

    resample_count = 0
    target_sample_count = 0
    accepted_count = 0

    while prefix.shape[1] < T:
        # q = M_q[prefix + x_0, x_1, .., x_(gamma-2)]
        prefix_len = prefix.shape[1]

        x = approx_model_cache.generate(prefix, gamma)
        _ = target_model_cache.generate(x, 1)

        n = prefix_len + gamma - 1


        for i in range(gamma):
            if random_seed:
                torch.manual_seed(random_seed)
            r = torch.rand(1, device = device)
            j = x[:, prefix_len + i]

            if r > (target_model_cache._prob_history[:, prefix_len + i - 1, j]) / (approx_model_cache._prob_history[:, prefix_len + i - 1, j]):
                # reject
                n = prefix_len + i - 1
                break

            if verbose:
                print(f"approx guess accepted {j[0]}: \033[31m{Decoder().decode(torch.tensor([j]))}\033[0m")

            accepted_count += 1

        # print(f"n : {n}, i : {i}, prefix_len + gamma - 1: {prefix_len + gamma - 1}")
        assert n >= prefix_len - 1, f"n {n}, prefix_len {prefix_len}"
        prefix = x[:, :n + 1]

        approx_model_cache.rollback(n+1)

        assert approx_model_cache._prob_history.shape[-2] <= n + 1, f"approx_model prob list shape {approx_model_cache._prob_history.shape}, n {n}"

        if n < prefix_len + gamma - 1:
            # reject someone, sample from the pos n
            t = sample(max_fn(target_model_cache._prob_history[:, n, :] - approx_model_cache._prob_history[:, n, :]))
            if verbose:
                print(f"target resamples at position {n}: \033[34m{Decoder().decode(t)}\033[0m")
            resample_count += 1
            target_model_cache.rollback(n+1)
        else:
            # all approx model decoding accepted
            assert n == target_model_cache._prob_history.shape[1] - 1
            t = sample(target_model_cache._prob_history[:, -1, :])
            if verbose:
                print(f"target samples {n}: \033[35m{Decoder().decode(t)}\033[0m")
            target_sample_count += 1
            target_model_cache.rollback(n+2)


        prefix = torch.cat((prefix, t), dim=1)

    if verbose:
        print(f"generated tokens numbers {prefix.shape[-1] - seq_len}, accepted_count {accepted_count}, target_sample_count {target_sample_count}, resample_count {resample_count}")
    return prefix


class _NoBar:  # GLUE: stands in for tqdm(total=..., desc=...) (no progress output)
    n = 0  # GLUE
    def __init__(self, **kw): pass  # GLUE
    def __enter__(self): return self  # GLUE
    def __exit__(self, *a): return False  # GLUE
    def update(self, d): self.n += d  # GLUE


@torch.no_grad()
def speculative_sampling_v2(prefix : torch.Tensor, approx_model : torch.nn.Module, target_model : torch.nn.Module,
                         max_len : int , gamma : int = 4,
                         temperature : float = 1, top_k : int = 0, top_p : float = 0, random_seed : int = None) -> torch.Tensor:
    """
    DeepMind version Speculative Sampling.
    Accelerating Large Language Model Decoding with Speculative Sampling
    https://arxiv.org/abs/2302.01318
    No KV Cache Optimization
    """
    seq_len = prefix.shape[1]
    T = seq_len + max_len

    assert prefix.shape[0] == 1, "input batch size must be 1"

    with _NoBar(total=T, desc="speculative sampling") as pbar:  # GLUE: was tqdm(...)
        while prefix.shape[1] < T:
            # q = M_q[prefix + x_0, x_1, .., x_(gamma-2)]
            x = prefix
            prefix_len = prefix.shape[1]
            for _ in range(gamma):
                # p.logits shape (batch, seq, vocab)
                q = approx_model(x).logits
                next_tok = sample(norm_logits(q[:, -1, :],
                                  temperature, top_k, top_p))
                x = torch.cat((x, next_tok), dim=1)

            # normalize the logits
            for i in range(q.shape[1]):
                q[:,i,:] = norm_logits(q[:,i,:],
                                temperature, top_k, top_p)
            # p  = M_p[prefix + x_0, x_0, .., x_(gamma-1)]
            p = target_model(x).logits
            for i in range(p.shape[1]):
                p[:,i,:] = norm_logits(p[:,i,:],
                                temperature, top_k, top_p)

            # n the end position of the valid prefix
            # x = x_[:prefix_len-1] + x_0, ... x_(gamma-1)

            is_all_accept = True
            n = prefix_len - 1
            for i in range(gamma):
                if random_seed:
                    torch.manual_seed(random_seed)
                r = torch.rand(1, device = p.device)
                j = x[:, prefix_len + i]

                if r < torch.min(torch.tensor([1], device=q.device), p[:, prefix_len + i - 1, j] / q[:, prefix_len + i - 1, j]):
                    # accept, and update n
                    n += 1
                else:
                    # reject
                    t = sample(max_fn(p[:, n, :] - q[:, n, :]))
                    is_all_accept = False
                    break

            prefix = x[:, :n + 1]

            if is_all_accept:
                t = sample(p[:, -1, :])

            prefix = torch.cat((prefix, t), dim=1)
            pbar.update(n - pbar.n)

    return prefix


# ---- GLUE: the recorder's FUNCTION signature -------------------------------------------------
def _check(temperature):  # GLUE
    if not temperature or temperature <= 0:  # GLUE
        raise ValueError("this loop samples only: declare --set temperature=T (> 0) --set verify=sampling")  # GLUE


def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(), temperature=1.0, **kw):  # GLUE
    """speculative_sampling (KV cache as legacy tuples, rollback by slicing)."""  # GLUE
    _check(temperature)  # GLUE
    out = speculative_sampling(input_ids, LegacyCacheModel(edge), LegacyCacheModel(cloud),  # GLUE
                               max_new_tokens, gamma=k, temperature=temperature)  # GLUE
    return out[0, input_ids.shape[1]:].tolist()  # GLUE: generated ids only, as returned (no stop cut)


def decode_v2(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(), temperature=1.0, **kw):  # GLUE
    """speculative_sampling_v2 (no KV cache: the whole sequence every forward)."""  # GLUE
    _check(temperature)  # GLUE
    out = speculative_sampling_v2(input_ids, edge, cloud, max_new_tokens, gamma=k,  # GLUE
                                  temperature=temperature)  # GLUE
    return out[0, input_ids.shape[1]:].tolist()  # GLUE
