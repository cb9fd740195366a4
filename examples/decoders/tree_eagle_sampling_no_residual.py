"""Bug: EAGLE's sibling rule with the residual NOT updated between siblings.

The loop is tree_eagle_sampling.py (EAGLE's `evaluate_posterior`, SafeAILab/EAGLE
eagle/model/utils.py at commit cb7e0841fe0c206c6ed74a197ad5e2a1f13f5a2b, Apache License 2.0,
Copyright 2025 SafeAI Lab (SAIL)), but after a sibling is rejected its mass is not removed from
the cloud's distribution (`gtp[xi] = 0; gtp = gtp / gtp.sum()` left out): every sibling is tried
against the unchanged p, and after the last rejection the token is drawn from p, not from the
residual. A rejected sibling can then come back as the correction (an event of probability 0
under the exact rule), and the emitted token over-weights the siblings: total variation of the
first token from the cloud's distribution 0.10-0.17 against a noise floor of 0.004-0.007
(issue 42; the exact rule: 0.002-0.003). Fix: set the rejected sibling's mass to 0 and
renormalise before trying the next one (tree_eagle_sampling.py).
"""
import random
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))   # the correct loop beside this file
import tree_eagle_sampling  # noqa: E402


def evaluate_posterior(
        logits: torch.Tensor,
        candidates: torch.Tensor,
        logits_processor,
):
    """
    Evaluate the posterior probabilities of the candidates based on the provided logits and choose the best candidate.

    Depending on the temperature value, the function either uses greedy decoding or evaluates posterior
    probabilities to select the best candidate.

    Args:
    - logits (torch.Tensor): Predicted logits of shape (batch_size, sequence_length, vocab_size).
    - candidates (torch.Tensor): Candidate token sequences.
    - temperature (float): Softmax temperature for probability scaling. A value of 0 indicates greedy decoding.
    - posterior_threshold (float): Threshold for posterior probability.
    - posterior_alpha (float): Scaling factor for the threshold.

    Returns:
    - best_candidate (torch.Tensor): Index of the chosen best candidate.
    - accept_length (int): Length of the accepted candidate sequence.
    """
    # Greedy decoding based on temperature value
    if logits_processor is None:
        # Find the tokens that match the maximum logits for each position in the sequence
        posterior_mask = (
                candidates[:, 1:].to(logits.device) == torch.argmax(logits[:, :-1], dim=-1)
        ).int()
        candidates_accept_length = (torch.cumprod(posterior_mask, dim=1)).sum(dim=1)
        accept_length = candidates_accept_length.max()
        # Choose the best candidate
        if accept_length == 0:
            # Default to the first candidate if none are accepted
            best_candidate = torch.tensor(0, dtype=torch.long, device=candidates.device)
        else:
            best_candidate = torch.argmax(candidates_accept_length).to(torch.long)
        return best_candidate, accept_length, logits[best_candidate, accept_length]

    else:
        accept_length = 1
        accept_cand = candidates[0][:1]
        best_candidate = 0
        for i in range(1, candidates.shape[1]):
            if i != accept_length:
                break
            adjustflag = False
            is_eq = (candidates[:, :accept_length] == accept_cand).all(dim=1)
            fi = torch.nonzero(is_eq, as_tuple=True)[0][0]
            gt_logits = logits[fi, i - 1][None]
            gt_logits = logits_processor(None, gt_logits)[0]
            gtp = torch.softmax(gt_logits, dim=0)
            candidates_set = []
            for j in range(candidates.shape[0]):
                if is_eq[j]:
                    x = candidates[j, i]
                    xi = x.item()
                    if xi in candidates_set or xi == -1:
                        continue
                    candidates_set.append(xi)
                    r = random.random()
                    px = gtp[xi]
                    qx = 1.0
                    acp = px / qx
                    if r <= acp:
                        accept_cand = torch.cat((accept_cand, x[None]), dim=0)
                        accept_length += 1
                        best_candidate = j
                        break
                    else:
                        adjustflag = True         # BUG: gtp[xi] = 0; gtp = gtp / gtp.sum() left out
        if adjustflag and accept_length != candidates.shape[1]:
            sample_p = gtp
        else:
            gt_logits = logits[best_candidate, accept_length - 1][None]
            gt_logits = logits_processor(None, gt_logits)[0]
            sample_p = torch.softmax(gt_logits, dim=0)
        return torch.tensor(best_candidate), accept_length - 1, sample_p


def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(),
           temperature=0.7, seed=0):
    return tree_eagle_sampling.run(edge, cloud, input_ids, k, max_new_tokens, stop_ids, temperature,
                                   seed, posterior=evaluate_posterior)
