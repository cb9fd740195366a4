"""EAGLE's official loop with its own stop handling: the stop id is looked for only after the
whole accepted path is appended, so ids that follow <|im_end|> on the path are returned
(expected: `missed_eos`, a root).

The loop is EAGLE's official one (SafeAILab/EAGLE, Apache-2.0, commit cb7e084; eagle_loop.py
carries the code, its licence and the glue).
"""
from eagle_loop import Variant, run


def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(), drafter=None):
    return run(cloud, drafter, input_ids, k, max_new_tokens, stop_ids, Variant(eagle_stop=True))  # BUG (EAGLE's own))
