"""Chains against trees on the same clips (issue 34): chain, static and dynamic trees and HF
assisted generation, with cloud-only as the reference; every output must equal the cloud's
greedy decode. Also the two ways to keep the accepted path in the cloud's cache: gather its
slots (the decoder's way) or crop to the prefix and feed the path again next round."""
from __future__ import annotations

from specdec_core.evaluation.bench.run import RUNNERS, bench_config, decode_stats, ours
from specdec_core.evaluation.bench.stats import ratio, spread, time_jobs

SHAPES = ("chain", "static", "dynamic")


def run_tree_bench(backend, prompts: list, k: int = 4, repeats: int = 3, log=print) -> dict:
    cfgs = {s: bench_config(k=k, draft_tree=s) for s in SHAPES}
    jobs = {"cloud_only": (RUNNERS["cloud_only"], cfgs["chain"]),
            "hf_assisted": (RUNNERS["hf_assisted"], cfgs["chain"]),
            **{s: (ours(False), cfgs[s]) for s in SHAPES},
            "dynamic_refeed": (ours(False, "refeed"), cfgs["dynamic"])}
    for p in prompts:                                   # warm-up
        for fn, cfg in jobs.values():
            fn(backend, p, cfg)
    times, first = time_jobs(backend, prompts, jobs, repeats, log, tag="trees ")
    ref = first["cloud_only"]
    res = {"k": k, "repeats": repeats, "clips": len(prompts),
           "tree_branch": cfgs["dynamic"].tree_branch, "tree_nodes": cfgs["dynamic"].tree_nodes,
           "identical_outputs": {j: first[j] == ref for j in jobs if j != "cloud_only"},
           "wall_s": {}, "speedup": {}, "speedup_range": {}}
    for j in jobs:
        res["wall_s"][j] = spread(times[j])
        if j != "cloud_only":
            res["speedup"][j], res["speedup_range"][j] = ratio(times["cloud_only"], times[j])
    res["refeed_over_gather"], res["refeed_over_gather_range"] = ratio(times["dynamic_refeed"], times["dynamic"])
    res["acceptance"] = {}
    for s in SHAPES:      # tree rounds draft (and count) nodes
        st = decode_stats(backend, prompts, cfgs[s])
        res["acceptance"][s] = {"mean_accepted_length": round(st["committed"] / max(1, st["calls"]), 4),
                                "nodes_per_call": round(st["drafted"] / max(1, st["calls"]), 4),
                                "cloud_calls": st["calls"]}
    return res


def tree_report(res: dict) -> str:
    lines = [f"chains vs trees, k={res['k']}, tree_branch={res['tree_branch']}, tree_nodes="
             f"{res['tree_nodes']}, {res['clips']} clips x {res['repeats']} repeats (interleaved)"]
    for j, med in res["speedup"].items():
        rng, acc = res["speedup_range"][j], res["acceptance"].get(j, {})
        lines.append(f"  {j:15s} {med:.2f}x over cloud-only [{rng[0]:.2f}-{rng[1]:.2f}]"
                     f"  identical={res['identical_outputs'][j]}"
                     + (f"  mean acceptance length {acc['mean_accepted_length']}, "
                        f"{acc['nodes_per_call']} nodes/call" if acc else ""))
    lo, hi = res["refeed_over_gather_range"]
    lines.append(f"  compaction: crop + re-feed takes {res['refeed_over_gather']:.3f}x the time of "
                 f"gather [{lo:.3f}-{hi:.3f}]")
    return "\n".join(lines)
