"""EAGLE's official loop with one defect: the accepted path's KV is not copied down after
acceptance (the cache keeps the first tree slots; expected: `stale_cache`).

The loop is EAGLE's official one (SafeAILab/EAGLE, Apache-2.0, commit cb7e084; eagle_loop.py
carries the code, its licence and the glue).
"""
from eagle_loop import Variant, run


def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(), drafter=None):
    return run(cloud, drafter, input_ids, k, max_new_tokens, stop_ids, Variant(copy_down=False))  # BUG)
