"""Bug (sglang #26982): the KV cache is not compacted to the accepted path after tree verification.

The loop is tree_correct.py, but after the verify forward it keeps the FIRST slots of the tree
(root, then the depth-1 candidates in tree order, ...) instead of copying the accepted nodes'
keys/values down: the right branch is chosen, then decoding continues on a cache that holds a
rejected sibling wherever the accepted path is not the tree's first nodes.
Fix: copy the accepted nodes down (tree_correct.copy_down), or crop to the prefix and re-feed.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))   # the correct loop beside this file
import tree_correct  # noqa: E402


def keep_first_slots(cache, select, past):
    tree_correct.rollback(cache, past + len(select))       # BUG: no copy-down of `select`


def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
    return tree_correct.run(edge, cloud, input_ids, k, max_new_tokens, stop_ids,
                            copy=keep_first_slots)
