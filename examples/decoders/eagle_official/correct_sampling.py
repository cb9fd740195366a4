"""EAGLE's official loop, correct, sampling (its `evaluate_posterior` sibling rule at the declared
temperature). Record with `--set temperature=0.7 --set verify=sampling`.

The loop is EAGLE's official one (SafeAILab/EAGLE, Apache-2.0, commit cb7e084; eagle_loop.py
carries the code, its licence and the glue).
"""
import random

import torch
from eagle_loop import Variant, run


def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(), drafter=None,
           temperature=0.7, seed=0):
    random.seed(seed)
    torch.manual_seed(seed)
    return run(cloud, drafter, input_ids, k, max_new_tokens, stop_ids, Variant(),
               temperature=temperature)
