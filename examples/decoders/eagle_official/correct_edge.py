"""EAGLE's official loop, correct and greedy, with the tree drafted by the edge model in the head's
place (fed what EAGLE feeds its head, `input_ids[:, 1:]`, on the edge's own cache).

The loop is EAGLE's official one (SafeAILab/EAGLE, Apache-2.0, commit cb7e084; eagle_loop.py
carries the code, its licence and the glue). Output = the cloud's greedy decode.
"""
from eagle_loop import Variant, run


def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
    return run(cloud, None, input_ids, k, max_new_tokens, stop_ids, Variant(edge_drafted=True), edge=edge)
