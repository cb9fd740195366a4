"""`bench --cloud-url URL`: the same clips decoded with the cloud in this process and behind the
server, interleaved in one run, outputs identical token for token: tokens/s, request time and
bytes per cloud call next to the link model's count (docs/remote.md, "Measured")."""
from __future__ import annotations

import statistics
import time


from specdec_core.decoding.baseline import cloud_only
from specdec_core.decoding.config import DecodeConfig
from specdec_core.decoding.decoder import SpeculativeDecoder

METHODS = ("local", "remote")


def _pct(v: list[float], q: float) -> float:
    v = sorted(v)
    return v[min(len(v) - 1, max(0, round(q * (len(v) - 1))))]


def run_remote_bench(local, remote, prompts: list, k: int = 4, repeats: int = 3, log=print) -> dict:
    cfg = DecodeConfig(k=k, cache_check_every=0)
    backends = {"local": local, "remote": remote}
    outs, mismatches = {}, []
    for i, p in enumerate(prompts):                      # warm-up and the outputs to compare
        ref = cloud_only(local, p, cfg)["token_ids"]
        outs[i] = {m: SpeculativeDecoder(b, cfg, trace=False).run(p) for m, b in backends.items()}
        mismatches += [(i, m) for m in METHODS if outs[i][m].token_ids != ref]
    tokens = sum(len(o["local"].token_ids) for o in outs.values())
    walls = {m: [] for m in METHODS}
    req, up, down = [], [], []
    for rep in range(repeats):
        order = METHODS if rep % 2 == 0 else METHODS[::-1]
        tot = dict.fromkeys(METHODS, 0.0)
        for p in prompts:
            for m in order:
                t0 = time.perf_counter()
                tr = SpeculativeDecoder(backends[m], cfg, trace=False).run(p)
                tot[m] += time.perf_counter() - t0
                if m == "remote":
                    calls = [r for r in tr.rounds if r.verified]
                    req += [r.request_s for r in calls]
                    up += [r.bytes_up for r in calls]
                    down += [r.bytes_down for r in calls]
        for m in METHODS:
            walls[m].append(tot[m])
        log(f"repeat {rep + 1}/{repeats}: " + "  ".join(f"{m}={tot[m]:.3f}s" for m in METHODS))
    model_up = [r.bytes_up for o in outs.values() for r in o["local"].rounds if r.verified]
    model_down = [r.bytes_down for o in outs.values() for r in o["local"].rounds if r.verified]
    tps = {m: sorted(tokens / w for w in walls[m]) for m in METHODS}
    res = {
        "k": k, "repeats": repeats, "clips": len(prompts), "tokens": tokens,
        "identical_outputs": not mismatches, "mismatches": mismatches,
        "cloud": getattr(remote, "model", None), "url": getattr(remote, "url", None),
        "tokens_per_s": {m: {"median": round(statistics.median(v), 2), "min": round(v[0], 2),
                             "max": round(v[-1], 2)} for m, v in tps.items()},
        "remote_over_local_time": round(statistics.median(walls["remote"]) / statistics.median(walls["local"]), 3),
        "calls": len(req),
        "request_ms": {"median": round(1000 * statistics.median(req), 2),
                       "p10": round(1000 * _pct(req, 0.1), 2), "p90": round(1000 * _pct(req, 0.9), 2)},
        "bytes_up_per_call": {"median": statistics.median(up), "min": min(up), "max": max(up)},
        "bytes_down_per_call": {"median": statistics.median(down), "min": min(down), "max": max(down)},
        "modelled_bytes_up_per_call": statistics.median(model_up),
        "modelled_bytes_down_per_call": statistics.median(model_down),
    }
    return res


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
