"""Bug (sglang #8228, fixed in #8409): drafting attends to the draft slots, not each node's parents.

The loop is tree_eagle_correct.py, but the edge's mask for each expansion lets every fed node
attend to the first draft slot of each earlier depth (the draft positions in slot order)
instead of the slots of its own ancestors: every node beyond the first branch is drafted as if
it continued the first branch. Verification is untouched, so the output is still the
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
    """Each fed node attends to the FIRST slot written at every earlier depth (the draft
    positions in slot order), not to the slots of its own ancestors."""
    vis = tree_eagle_correct.ancestors_mask(nodes, fed, past, slot_of)
    first = {}
    for i, slot in slot_of.items():
        d = nodes[i]["depth"]
        first[d] = min(first.get(d, slot), slot)
    for r, i in enumerate(fed):
        a = nodes[i]["parent"]
        while a is not None:
            vis[r, slot_of[a]] = False
            vis[r, first[nodes[a]["depth"]]] = True     # BUG: the depth's first draft slot
            a = nodes[a]["parent"]
    return vis


def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
    return tree_eagle_correct.run(edge, cloud, input_ids, k, max_new_tokens, stop_ids,
                                  edge_mask=draft_slots_mask)
