"""`bench --cloud-url URL`: the same clips decoded with the cloud in this process and behind the
server, interleaved in one run (bench/stats.time_jobs), outputs identical token for token: tokens/s,
request time and bytes per cloud call next to the link model's count (docs/remote.md, "Measured")."""
from __future__ import annotations

import statistics

from specdec_core.decoding.baseline import cloud_only
from specdec_core.decoding.config import DecodeConfig
from specdec_core.decoding.decoder import SpeculativeDecoder
from specdec_core.evaluation.bench.stats import percentile, speedup, spread, time_jobs

METHODS = ("local", "remote")


def _spread(v: list, digits: int | None = None) -> dict:
    med, (lo, hi) = spread(v, digits)
    return {"median": med, "min": lo, "max": hi}


def run_remote_bench(local, remote, prompts: list, k: int = 4, repeats: int = 3, log=print) -> dict:
    cfg = DecodeConfig(k=k, cache_check_every=0)
    backends = {"local": local, "remote": remote}
    outs, mismatches = {}, []
    for i, p in enumerate(prompts):                      # warm-up and the outputs to compare
        ref = cloud_only(local, p, cfg)["token_ids"]
        outs[i] = {m: SpeculativeDecoder(b, cfg, trace=False).run(p) for m, b in backends.items()}
        mismatches += [(i, m) for m in METHODS if outs[i][m].token_ids != ref]
    tokens = sum(len(o["local"].token_ids) for o in outs.values())
    calls = []                                           # the remote's verified rounds, all repeats

    def decode(m):
        def run(_backend, p, cfg):
            tr = SpeculativeDecoder(backends[m], cfg, trace=False).run(p)
            if m == "remote":
                calls.extend(r for r in tr.rounds if r.verified)
        return run
    walls, _ = time_jobs(local, prompts, {m: (decode(m), cfg) for m in METHODS}, repeats, log)
    req, up, down = ([getattr(r, a) for r in calls] for a in ("request_s", "bytes_up", "bytes_down"))
    model_up, model_down = ([getattr(r, a) for o in outs.values() for r in o["local"].rounds if r.verified]
                            for a in ("bytes_up", "bytes_down"))     # the link model's count
    return {
        "k": k, "repeats": repeats, "clips": len(prompts), "tokens": tokens,
        "identical_outputs": not mismatches, "mismatches": mismatches,
        "cloud": getattr(remote, "model", None), "url": getattr(remote, "url", None),
        "tokens_per_s": {m: _spread([tokens / w for w in walls[m]], 2) for m in METHODS},
        "remote_over_local_time": round(speedup(walls["remote"], walls["local"])[0], 3),
        "calls": len(req),
        "request_ms": {"median": round(1000 * statistics.median(req), 2),
                       "p10": round(1000 * percentile(req, 0.1), 2), "p90": round(1000 * percentile(req, 0.9), 2)},
        "bytes_up_per_call": _spread(up), "bytes_down_per_call": _spread(down),
        "modelled_bytes_up_per_call": statistics.median(model_up),
        "modelled_bytes_down_per_call": statistics.median(model_down),
    }


def format_report(r: dict) -> str:
    t = r["tokens_per_s"]
    return "\n".join([
        f"cloud={r['cloud']} at {r['url']}  k={r['k']} clips={r['clips']} tokens={r['tokens']} "
        f"repeats={r['repeats']} identical_outputs={r['identical_outputs']}",
        "tokens/s (median [min-max]): " + "  ".join(
            f"{m}={t[m]['median']} [{t[m]['min']}-{t[m]['max']}]" for m in METHODS),
        f"remote/local wall time      {r['remote_over_local_time']}",
        f"request ms per call         median {r['request_ms']['median']} "
        f"(p10 {r['request_ms']['p10']}, p90 {r['request_ms']['p90']}) over {r['calls']} calls",
        f"HTTP bytes per call         up {r['bytes_up_per_call']['median']} "
        f"[{r['bytes_up_per_call']['min']}-{r['bytes_up_per_call']['max']}], down "
        f"{r['bytes_down_per_call']['median']} [{r['bytes_down_per_call']['min']}-"
        f"{r['bytes_down_per_call']['max']}]",
        f"link-model bytes per call   up {r['modelled_bytes_up_per_call']}, down "
        f"{r['modelled_bytes_down_per_call']} (token ids + framing)",
    ])
