"""Bug (sglang #8228, fixed in #8409): drafting attends to the draft slots, not each node's parents.

The loop is tree_eagle_correct.py, but the edge's mask for each expansion lets every fed node
see all the draft slots written so far (every node of the previous depths, siblings and cousins
included) instead of its ancestors only. Verification is untouched, so the output is still the
cloud's greedy decode (lossless), but the drafts come from contexts no path has: fewer of them
are accepted, and no error shows anywhere.
Fix: each drafting row sees the prefix and its own ancestors' slots (ancestors_mask).
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))   # the correct loop beside this file
import tree_eagle_correct  # noqa: E402


def draft_slots_mask(nodes, fed, past, slot_of):
    vis = torch.ones(len(fed), past + len(fed), dtype=torch.bool)   # BUG: every draft slot
    vis[:, past:] = torch.eye(len(fed), dtype=torch.bool)
    return vis


def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
    return tree_eagle_correct.run(edge, cloud, input_ids, k, max_new_tokens, stop_ids,
                                  edge_mask=draft_slots_mask)
