"""EAGLE's official loop, correct and greedy: the verifier called through its parts
(`base_model.model(...)` then `base_model.lm_head(...)`), the head fed `input_ids[:, 1:]`.

The loop is EAGLE's official one (SafeAILab/EAGLE, Apache-2.0, commit cb7e084; eagle_loop.py
carries the code, its licence and the glue). Output = the cloud's greedy decode.
"""
from eagle_loop import Variant, run


def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(), drafter=None):
    return run(cloud, drafter, input_ids, k, max_new_tokens, stop_ids, Variant())
