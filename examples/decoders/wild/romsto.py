"""Adapter: romsto/Speculative-Decoding, `speculative_generate` (Leviathan et al. 2023), run the
way the repo runs it by default: `use_cache=False`, so every forward re-runs the whole sequence
(a `[1, total_len]` buffer of ids, sliced `input_ids[..., :current_position + k]`).

Source: https://github.com/romsto/Speculative-Decoding
Commit: db7db67604359d0380c330c240c276ec1f85ba65 (2024-12-02)
Files:  sampling/speculative_decoding.py, utils/logits_processor.py
Licence: MIT. Copyright (c) 2024 Romain. Permission is hereby granted, free of charge, to any
person obtaining a copy of this software and associated documentation files (the "Software"),
to deal in the Software without restriction, including without limitation the rights to use,
copy, modify, merge, publish, distribute, sublicense, and/or sell copies of the Software, and
to permit persons to whom the Software is furnished to do so, subject to the following
conditions: The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software. THE SOFTWARE IS PROVIDED "AS IS", WITHOUT
WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF
MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN
ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE
OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
Modified by SpecScope: the long docstring is shortened, the unused processors (top-k, nucleus)
and the cache pruning (`use_cache=True` only) are left out, and every changed or added line is
marked `# GLUE:`.

Two entry points:
- `decode`: the repo's default processor, `GreedyProcessor()` (argmax drafts). Record with the
  default greedy declaration.
- `decode_sampling`: `MultinomialProcessor(temperature)`. Record with
  `--set temperature=0.7 --set verify=sampling`.

Our reading:
- REAL BUG with the default GreedyProcessor: the drafts and corrections are argmax picks, but
  acceptance is still the stochastic rule r > p(x)/q(x) over the full softmax (temperature 1),
  and the correction is the argmax of max(0, p - q), not of p. A draft the target ranks 2nd
  can be accepted, and a correction can differ from the target's argmax: the output is not the
  target's greedy output ("greedy draft with stochastic accept").
- With MultinomialProcessor it is a correct Leviathan loop: ratio test, residual, bonus token,
  stop ids checked in the accepted drafts and in the extra token, never past max_gen_len.
- `use_cache=True` does not work on transformers 5 (it feeds the whole sequence again WITH the
  cache, and `prune_dynamic_cache` uses `cache.key_cache`, gone in transformers 5); the repo's
  default is False, which is what is recorded here.
"""
import abc

import torch
from torch import Tensor
from torch.nn import Module
from torch.nn import functional as F
from typing import List, Tuple


class _Printing:  # GLUE: utils.printing is only used with debug=True (never here)
    def __getattr__(self, name):  # GLUE
        return lambda *a, **k: None  # GLUE


printing = _Printing()  # GLUE


# ---- utils/logits_processor.py (GreedyProcessor, MultinomialProcessor) ------------------------
class LogitsProcessor(abc.ABC):
    """Logits processors for sampling."""

    def __init__(self, temperature: float):
        self.temperature = temperature

    def __call__(self, logits: Tensor) -> Tensor:
        proc = self._process(logits)
        return F.softmax(proc / self.temperature, dim=-1)

    @abc.abstractmethod
    def _process(self, logits: Tensor) -> Tensor:
        pass

    @abc.abstractmethod
    def sample(self, probs: Tensor) -> Tensor:
        pass


class GreedyProcessor(LogitsProcessor):
    """Greedy: Most probable token."""

    def __init__(self, temperature: float = 1):
        super().__init__(temperature)

    def _process(self, logits: Tensor) -> Tensor:
        return logits

    def sample(self, probs: Tensor) -> Tensor:
        return torch.argmax(probs, dim=-1).unsqueeze(-1)


class MultinomialProcessor(LogitsProcessor):
    """Multinomial: Random sampling."""

    def __init__(self, temperature: float):
        super().__init__(temperature)

    def _process(self, logits: Tensor) -> Tensor:
        return logits

    def sample(self, probs: Tensor) -> Tensor:
        return torch.multinomial(probs, num_samples=1)


# ---- sampling/speculative_decoding.py ---------------------------------------------------------
def max_fn(x: torch.Tensor) -> torch.Tensor:
    """
    Max function.
        x: input tensor.
    Returns:
        tensor norm(max(0, x)).
    """
    x_max = torch.where(x > 0, x, torch.zeros_like(x))
    x_max_sum = torch.sum(x_max, dim=-1, keepdim=True)
    return x_max / x_max_sum


@torch.no_grad()
def speculative_generate(
    inputs: List[int],
    drafter: Module,
    target: Module,
    tokenizer = None,
    gamma: int = 5,
    logits_processor: LogitsProcessor = GreedyProcessor(),
    max_gen_len: int = 40,
    eos_tokens_id: int | List[int] = 1,
    pad_token_id: int = 0,
    use_cache: bool = False,
    skip_sample_adjustment: bool = False,
    first_target: bool = True,
    debug: bool = False,
) -> Tuple[List[int], float]:
    """Generate text sequence using the speculative decoding algorithm (arXiv 2211.17192)."""
    
    drafter_cache, target_cache = None, None

    list_tokens_id = eos_tokens_id if isinstance(eos_tokens_id, list) else [eos_tokens_id]
    stop_tokens = torch.tensor(list_tokens_id, dtype=torch.long, device=target.device).unsqueeze(1)
    
    drafts_accepted, drafts_speculated = .0, .0
    
    vocabulary_size = target.config.vocab_size    
        
    # prepare input tensor
    prompt_len = len(inputs)
    max_seq_length = target.config.max_position_embeddings if hasattr(target.config, 'max_position_embeddings') else (target.config.max_context_length if hasattr(target.config, 'max_context_length') else 1024)
    total_len = min(max_seq_length, prompt_len + max_gen_len)
    input_ids = torch.full((1, total_len), pad_token_id, dtype=torch.long, device=target.device)
    input_ids[0, :prompt_len] = torch.tensor(inputs, dtype=torch.long, device=target.device)
    
    current_position = prompt_len
    
    if first_target:
        # run the target model before the speculative algorithm. Allows to prefill the kvcache and get a first token.
        Mp = target(
            input_ids=input_ids[..., :current_position],
            past_key_values=target_cache,
            use_cache=use_cache,
        )
        target_cache = Mp.past_key_values
        p_p = logits_processor(Mp.logits[..., -1, :])
        t = logits_processor.sample(p_p)
        input_ids[0, current_position] = t
        current_position += 1
        
        if torch.isin(t, stop_tokens):
            if debug:
                printing.end_token_found(0)
            return input_ids[0, prompt_len:current_position].tolist(), 0
        
        if debug:
            printing.initial_step(t, tokenizer)
    
    while current_position < total_len:
        corrected_gamma = min(gamma, total_len - current_position - 1)
        q = torch.zeros((1, corrected_gamma, vocabulary_size), device=target.device)
        
        input_ids = input_ids.to(drafter.device)
        
        # generate gamma drafts
        for k in range(corrected_gamma):
            Mq = drafter(
                input_ids=input_ids[..., :current_position + k],
                past_key_values=drafter_cache,
                use_cache=use_cache,
            )
            drafter_cache = Mq.past_key_values
            
            draft_logits = Mq.logits[..., -1, :]
            draft_probs = logits_processor(draft_logits)
            q[0, k] = draft_probs.to(target.device)
            xi = logits_processor.sample(draft_probs)
            input_ids[0, current_position + k] = xi
        drafts_speculated += corrected_gamma
        input_ids = input_ids.to(target.device)
        
        # run target model on drafts and get logits of the previous tokens plus one more token
        Mp = target(
            input_ids=input_ids[..., :current_position + corrected_gamma],
            past_key_values=target_cache,
            use_cache=use_cache,
        )
        target_cache = Mp.past_key_values
        draft_logits = Mp.logits[..., current_position - 1:current_position + corrected_gamma - 1, :] # [1, corrected_gamma, vocab_size]
        p = logits_processor(draft_logits) # [1, gamma, vocab_size]
        
        # compute the last accepted draft position (rejection sampling)
        r = torch.rand(corrected_gamma, device=target.device)
        fractions = p / q
        n = corrected_gamma
        for i in range(corrected_gamma):
            if r[i] > fractions[0, i, input_ids[0, current_position + i]]:
                n = i
                break
        
        drafts_accepted += n
        
        # check if the end token is in the drafts
        stop_locations = torch.nonzero(torch.eq(input_ids[..., current_position:current_position + n], stop_tokens))
        if stop_locations.shape[0] > 0:
            stop_location = stop_locations[0, 1].item()
            if debug:
                printing.end_token_found(stop_location)
            return input_ids[0, prompt_len:current_position + stop_location + 1].tolist(), drafts_accepted / drafts_speculated

        # adjust the distribution from Mp
        if n == corrected_gamma:
            p_p = Mp.logits[..., current_position + corrected_gamma - 1, :]
            p_p = logits_processor(p_p)
        else:
            # prune the cache
            if use_cache:
                raise NotImplementedError("use_cache=True is not adapted (see the header)")  # GLUE: was prune_cache(...)
            
            if not skip_sample_adjustment:
                p_p = max_fn(p[..., n, :] - q[0, n, :])
            else:
                p_p = p[..., n, :]
        x = logits_processor.sample(p_p)
        
        if debug:
            generated = input_ids.clone().detach()
            
        input_ids[0, current_position + n:current_position + corrected_gamma] = pad_token_id
        input_ids[0, current_position + n] = x
        
        if debug:
            printing.speculative_step(tokenizer, generated, input_ids, n, prompt_len, current_position, corrected_gamma)
            
        current_position += n + 1
        
        if torch.isin(x, stop_tokens):
            if debug:
                printing.end_token_found(n)
            return input_ids[0, prompt_len:current_position].tolist(), drafts_accepted / drafts_speculated
    
    return input_ids[0, prompt_len:].tolist(), drafts_accepted / drafts_speculated


# ---- GLUE: the recorder's FUNCTION signature -------------------------------------------------
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(), **kw):  # GLUE
    """The repo's defaults: GreedyProcessor(), use_cache=False."""  # GLUE
    out, _rate = speculative_generate(input_ids[0].tolist(), edge, cloud, tokenizer, gamma=k,  # GLUE
                                      max_gen_len=max_new_tokens,  # GLUE
                                      eos_tokens_id=[int(s) for s in stop_ids])  # GLUE
    return out  # GLUE


def decode_sampling(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(),  # GLUE
                    temperature=1.0, **kw):  # GLUE
    """MultinomialProcessor(temperature), use_cache=False."""  # GLUE
    if not temperature or temperature <= 0:  # GLUE
        raise ValueError("decode_sampling samples: declare --set temperature=T (> 0) --set verify=sampling")  # GLUE
    out, _rate = speculative_generate(input_ids[0].tolist(), edge, cloud, tokenizer, gamma=k,  # GLUE
                                      logits_processor=MultinomialProcessor(temperature),  # GLUE
                                      max_gen_len=max_new_tokens,  # GLUE
                                      eos_tokens_id=[int(s) for s in stop_ids])  # GLUE
    return out  # GLUE
