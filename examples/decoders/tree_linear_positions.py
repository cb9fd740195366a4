"""Bug: tree positions counted by slot, not by depth.

The loop is tree_correct.py with position_ids = prefix + arange(nodes) over the flattened tree:
siblings get different rotary positions and deeper nodes sit too far from the prefix, so the
cloud scores each node as if a different text preceded it: the output leaves the
cloud's greedy decode.
Fix: positions = prefix length + depth (Medusa's medusa_position_ids).
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))   # the correct loop beside this file
import tree_correct  # noqa: E402


def slot_positions(buf, past):
    return (torch.arange(len(buf["depth"])) + past).unsqueeze(0)   # BUG: by slot, not depth


def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
    return tree_correct.run(edge, cloud, input_ids, k, max_new_tokens, stop_ids,
                            positions=slot_positions)
