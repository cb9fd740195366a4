"""EAGLE's official loop with one defect: the head is fed the cloud features of the first tree
slots instead of the accepted path's (the effect of vllm #14649; expected: `stale_features`).

The loop is EAGLE's official one (SafeAILab/EAGLE, Apache-2.0, commit cb7e084; eagle_loop.py
carries the code, its licence and the glue).
"""
from eagle_loop import Variant, run


def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(), drafter=None):
    return run(cloud, drafter, input_ids, k, max_new_tokens, stop_ids, Variant(slot_features=True))  # BUG)
