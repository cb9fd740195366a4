"""Recording while other code decodes with the same loaded models (the app: several browser
sessions share one backend).

The Recorder's hooks sit on the model objects, so every forward of a hooked model is recorded,
whoever runs it. `private_pair` gives a recording its own deep copies of the two models: the
hooks, and anything the recorded decoder does to the models (a resized head, a changed
generation_config), stay on the copies, and concurrent decodes on the shared models never reach
the recording. Correct under any concurrency (Gradio worker threads, a decoder that runs its own
threads), at the cost of one copy of the weights per running recording: ~0.3 s and ~10 MB for
the demo pair. For Omni-size models (7 GB+ each) copies are not affordable; there, recordings
must exclude other decodes instead (a lock shared with them), which this app does not need.
"""
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
