"""Recording while other code decodes with the same loaded models: `private_pair` gives a
recording its own deep copies of the two models, so neither the hooks nor concurrent decodes
cross over (docs/recorder.md)."""
from __future__ import annotations

import copy


def private_pair(edge, cloud):
    """Deep copies of (edge, cloud); one copy when they are the same model object."""
    e = copy.deepcopy(edge)
    e.eval()
    if cloud is edge:
        return e, e
    c = copy.deepcopy(cloud)
    c.eval()
    return e, c
