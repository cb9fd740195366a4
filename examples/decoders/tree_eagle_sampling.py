"""A correct SAMPLING tree loop with EAGLE's own verification rule (SpecInfer's sibling rule).

`evaluate_posterior` and `prepare_logits_processor` below are copied unchanged from SafeAILab/EAGLE
(eagle/model/utils.py at commit cb7e0841fe0c206c6ed74a197ad5e2a1f13f5a2b; Apache License 2.0,
Copyright 2025 SafeAI Lab (SAIL): https://www.apache.org/licenses/LICENSE-2.0). The rest is
tree_eagle_correct.py (the edge drafts an EAGLE-2 dynamic tree; one cloud forward with a tree
mask; the accepted nodes' KV copied down) with EAGLE's sampling branch around it: the tree's
leaf paths as `retrieve_indices` (one row per leaf, root first, -1 padded, sorted as EAGLE's
`topK_genrate` sorts them under sampling), `candidates` and `logits` gathered through them, and
the next token drawn from the `sample_p` the rule returns (EAGLE's `update_inference_inputs`).

The rule: at each level the children of the accepted node are tried in turn, each accepted with
probability equal to the (renormalised) residual's mass on it (the children are chosen, not
sampled: q is a point mass, `qx = 1.0`); after each rejection that child's mass is set to 0 and
the rest renormalised; after the last rejection the token is drawn from that residual. The
emitted token is distributed exactly as the cloud's p at T. Record it with
`--set temperature=0.7 --set verify=sampling`. tree_eagle_sampling_no_residual.py is this loop
with the residual left as it was between siblings (`# BUG`).

Adaptations: `random.random()` is seeded by `seed` (random.seed) and the next token is drawn
with a seeded torch.Generator, so that each clip is reproducible.
"""
import random
import sys
from pathlib import Path

import torch
from transformers import DynamicCache
from transformers.generation.logits_process import (LogitsProcessorList, RepetitionPenaltyLogitsProcessor,
                                                    TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper)

sys.path.insert(0, str(Path(__file__).resolve().parent))   # the greedy tree loop beside this file
import tree_eagle_correct as tree  # noqa: E402


# ---- from SafeAILab/EAGLE eagle/model/utils.py (Apache-2.0), unchanged ------------------------
def prepare_logits_processor(
        temperature: float = 0.0,
        repetition_penalty: float = 0.0,
        top_p: float = 0.0,
        top_k: int = 0
) -> LogitsProcessorList:
    processor_list = LogitsProcessorList()
    if temperature > 1e-5:
        if temperature >= 1e-5 and temperature != 1.0:
            processor_list.append(TemperatureLogitsWarper(temperature))
        if repetition_penalty > 1.0:
            processor_list.append(RepetitionPenaltyLogitsProcessor(repetition_penalty))
        if 1e-8 <= top_p < 1.0:
            processor_list.append(TopPLogitsWarper(top_p))
        if top_k > 0:
            processor_list.append(TopKLogitsWarper(top_k))
    return processor_list


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
                        gtp[xi] = 0
                        gtp = gtp / gtp.sum()
                        adjustflag = True
        if adjustflag and accept_length != candidates.shape[1]:
            sample_p = gtp
        else:
            gt_logits = logits[best_candidate, accept_length - 1][None]
            gt_logits = logits_processor(None, gt_logits)[0]
            sample_p = torch.softmax(gt_logits, dim=0)
        return torch.tensor(best_candidate), accept_length - 1, sample_p
# ---- end of EAGLE's code ---------------------------------------------------------------------


def retrieve_indices(nodes, order, row):
    """EAGLE's retrieve_indices for the verified tree: per leaf, the tree indices of its path
    (0 = the root, then each node's row in the verify forward), -1 padded, sorted as EAGLE does
    when a logits processor is given."""
    parents = {nodes[i]["parent"] for i in order}
    depth = max(nodes[i]["depth"] for i in order)
    out = []
    for leaf in (i for i in order if i not in parents):
        path, a = [], leaf
        while a is not None:
            path.append(row[a])
            a = nodes[a]["parent"]
        out.append([0] + path[::-1] + [-1] * (depth - len(path)))
    maxitem = len(order) + 5
    return sorted(out, key=lambda lst: [x if x >= 0 else maxitem for x in lst])


@torch.no_grad()
def run(edge, cloud, input_ids, k, max_new_tokens, stop_ids, temperature, seed,
        posterior=evaluate_posterior):
    random.seed(seed)                      # evaluate_posterior draws with random.random()
    gen = torch.Generator().manual_seed(seed)
    processor = prepare_logits_processor(temperature=temperature)
    stop_ids, seq = {int(s) for s in stop_ids}, input_ids[0].tolist()
    n_prompt = len(seq)
    edge_cache, cloud_cache = DynamicCache(), DynamicCache()
    out = cloud(input_ids=input_ids.to(cloud.device), past_key_values=cloud_cache, use_cache=True)
    first = processor(None, out.logits[0, -1:].float())[0]
    seq.append(int(torch.multinomial(torch.softmax(first, -1), 1, generator=gen)))
    while seq[-1] not in stop_ids and len(seq) - n_prompt < max_new_tokens:
        edge_seen = edge_cache.get_seq_length()
        nodes = tree.draft_tree(edge, edge_cache, seq[edge_seen:], len(seq) - 1, k)
        tree.rollback(edge_cache, len(seq))                 # crop; the path is fed next round
        order = tree.select(nodes)
        past = cloud_cache.get_seq_length()
        logp, row = tree.verify(cloud, cloud_cache, seq[-1], nodes, order)
        ret = torch.tensor(retrieve_indices(nodes, order, row), dtype=torch.long)
        tree_ids = torch.tensor([seq[-1]] + [nodes[i]["tok"] for i in order] + [-1])
        best, accept_length, sample_p = posterior(logp[ret], tree_ids[ret], processor)
        by_row = {r: i for i, r in row.items()}
        path = [by_row[int(r)] for r in ret[int(best), 1:int(accept_length) + 1]]
        token = int(torch.multinomial(sample_p.float(), 1, generator=gen))
        tree.copy_down(cloud_cache, [past] + [past + row[i] for i in path], past)
        for tok in [nodes[i]["tok"] for i in path] + [token]:
            seq.append(tok)
            if tok in stop_ids or len(seq) - n_prompt >= max_new_tokens:
                break
    return seq[n_prompt:]


def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(),
           temperature=0.7, seed=0):
    return run(edge, cloud, input_ids, k, max_new_tokens, stop_ids, temperature, seed)
