"""A remote cloud's verify requests as recorded forwards.

A cloud behind a server (`--cloud-url`, backends/remote.py) runs no module the Recorder can hook:
each verify is one /v1/completions request that sends the whole sequence (no cache) and gets
the log-prob, rank and top-1 of every drafted token, plus the token after the block. That is a
forward of the cloud with `cache = None` whose scored rows are the block's, so the recorder's
checks judge a remote run as they judge a local one (rows hold the top-1 only; `entropy` is
unknown)."""
from __future__ import annotations

import time


def remote_forward(recorder, ids: list[int], rows: list, bonus: int, bonus_lp: float,
                   seconds: float) -> None:
    """Append the request that scored `rows` (one per drafted token, the block being the last
    len(rows) of `ids`) and the bonus row after it to `recorder.forwards`."""
    n = len(rows)
    t = time.perf_counter() - recorder._t0
    # the server was checked to serve the tokenizer's vocabulary (backends/remote.py): the
    # edge's logits width stands for the cloud's
    width = next((f["rows"]["vocab"] for f in reversed(recorder.forwards)
                  if f["model"] == "edge" and f.get("rows")), None)
    recorder.forwards.append({
        "i": len(recorder.forwards), "model": "cloud", "ids": list(ids), "batch": 1,
        "position_ids": None, "cache_position": None, "mask_shape": None, "cache_len": 0,
        "cache": None, "use_cache": False, "inputs_embeds": False, "remote": True,
        "time": {"t": round(t - seconds, 6), "dur": round(seconds, 6), "pre": 0.0, "post": 0.0},
        "rows": {"offset": len(ids) - n - 1, "vocab": width,
                 "argmax": [r.top_id for r in rows] + [bonus],
                 "top_ids": [[r.top_id] for r in rows] + [[bonus]],
                 "top_logp": [[round(r.top_logprob, 5)] for r in rows] + [[round(bonus_lp, 5)]],
                 "entropy": [None] * (n + 1),
                 "next_rank": [r.rank for r in rows], "next_logp": [round(r.logprob, 5) for r in rows],
                 "fed_next": None}})
