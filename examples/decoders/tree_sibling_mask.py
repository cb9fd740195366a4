"""Bug: the tree attention mask lets a node see its earlier siblings.

The loop is tree_correct.py with each node's mask row built from every earlier node of the
previous depth and its own depth (a "staircase" by depth, as when the mask is built from the
depths instead of the parents): a node attends to siblings and cousins that are not in its
path, and the cloud's verdict on its children is taken on a context no path has.
Fix: a node sees the prefix, its ancestors and itself only (tree_correct.tree_buffers).
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))   # the correct loop beside this file
import tree_correct  # noqa: E402


def sibling_mask(buf, past, dtype, device):
    m = buf["mask"].clone()
    d = buf["depth"]
    for i in range(len(d)):
        for j in range(i):
            if d[j] == d[i]:
                m[i, j] = True                       # BUG: a node also sees its earlier siblings
    return tree_correct.tree_mask({**buf, "mask": m}, past, dtype, device)


def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
    return tree_correct.run(edge, cloud, input_ids, k, max_new_tokens, stop_ids,
                            mask=sibling_mask)
