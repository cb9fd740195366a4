"""`bench`: the interleaved speed benchmark of the built-in decoder (evaluation/bench*.py),
and, with --cloud-url, the local cloud against the same cloud behind a server."""
from __future__ import annotations

import sys
from pathlib import Path

from specdec_core.api import load_backend, open_backend
from specdec_core.cli import reports
from specdec_core.cli.commands import engine_ok, write_json
from specdec_core.decoding.config import DecodeConfig, parse_sets
from specdec_core.decoding.decoder import model_dtype
from specdec_core.errors import UserError


def cmd_bench(args) -> int:
    if getattr(args, "cloud_url", None):   # local cloud vs the same cloud behind the server
        return cmd_remote_bench(args)
    import torch

    from specdec_core.evaluation.bench.advice import advise, check_advice
    from specdec_core.evaluation.bench.run import run_bench
    from specdec_core.evaluation.bench.cost_model import Costs
    from specdec_core.evaluation.bench.sweep import DEFAULT_KS, plot_sweeps, run_sweeps

    # Tiny models run fastest on one thread, and a fixed count keeps repeats comparable when
    # something else shares the cores (oversubscribed OpenMP threads spin and distort timings).
    torch.set_num_threads(args.threads)
    _bench_knobs_ok(args)
    backend = load_backend(args.backend, **{k: v for k in ("edge_model", "cloud_model", "prompt", "device", "dtype")
                                            if (v := getattr(args, k, None))})
    prompts = _prompts(backend, args)
    log = lambda s: print(s, file=sys.stderr)  # noqa: E731
    ks = list(args.ks or DEFAULT_KS)
    widths = sorted(set(range(1, max(ks + [args.k]) + 2)) | {12, 16})   # wider: catch-up after gated rounds
    knobs = dict(parse_sets(args.sets))
    engine_ok(backend, DecodeConfig.from_dict(knobs).engine)   # a bad knob: one line before any decode
    res = run_bench(backend, prompts, k=args.k, repeats=args.repeats, log=log, widths=widths,
                    clock=args.clock, knobs=knobs)
    costs = Costs.from_dict(res["cost_model"])
    if not args.no_advice:
        res["advice"] = advise(backend, prompts, costs, None, ks, thresholds=args.thresholds,
                               budget=args.quality_budget, log=log)
        res["cost_model"]["overhead_per_k_s"] = round(costs.overhead_per_k, 7)
        res["advice_check"] = check_advice(backend, prompts, res["advice"], repeats=args.repeats, log=log)
    if args.trees:
        res["trees"] = _bench_trees(backend, prompts, args, costs, log)
    if args.sweep:
        res.update(run_sweeps(backend, prompts, res["c"], k=args.k, ks=args.ks or DEFAULT_KS,
                              thresholds=args.thresholds, repeats=args.sweep_repeats or args.repeats,
                              log=log, costs=costs))
    res["backend"] = args.backend
    res["dtype"] = model_dtype(backend)
    res["torch_threads"] = torch.get_num_threads()
    print(reports.bench_report(res))
    if args.json:
        out = Path(args.json)
        if args.sweep:
            out.parent.mkdir(parents=True, exist_ok=True)
            png = plot_sweeps(res, out.with_suffix(".sweep.png"))
            res["sweep_plot"] = str(png) if png else None
        write_json(out, res)
        print(f"wrote {out}" + (f" and {res['sweep_plot']}" if res.get("sweep_plot") else ""))
    print(reports.bench_summary(res))
    return 0 if res["identical_outputs"] and not reports.classic_sweep_mismatches(res) else 1


def _prompts(backend, args) -> list:
    """The benchmarked prompts: the text prompt of a text-only pair, else --clips sample clips."""
    from specdec_core.evaluation.bench.run import sample_prompts

    prompts = ([backend.build_inputs(None, "detailed")] if not backend.needs_audio
               else sample_prompts(backend, args.clips))
    if not prompts:
        raise UserError("no prompts to benchmark")
    return prompts


def _bench_trees(backend, prompts, args, costs, log) -> dict:
    """bench --trees: chain vs static vs dynamic trees, and the cost model's advice."""
    from specdec_core.evaluation.bench.trees import run_tree_bench, tree_report
    from specdec_core.evaluation.bench.cost_model import tree_advice

    t = run_tree_bench(backend, prompts, k=args.k, repeats=args.repeats, log=log)
    t["advice"] = tree_advice(costs, args.k, t["tree_branch"], t["tree_nodes"],
                              {s: t["acceptance"][s]["mean_accepted_length"] for s in ("chain", "dynamic")})
    log(tree_report(t) + "\n  " + t["advice"]["advice"])
    return t


def _bench_knobs_ok(args) -> None:
    """Bad bench arguments fail now, not after the main run."""
    from specdec_core.evaluation.bench.run import bench_config

    if args.repeats < 1 or (args.sweep_repeats is not None and args.sweep_repeats < 1):
        raise UserError("--repeats and --sweep-repeats must be at least 1")
    if not 0 <= args.quality_budget <= 1:
        raise UserError("--quality-budget must be between 0 and 1")
    for x in args.ks or ():
        bench_config(k=x)
    for t in args.thresholds or ():
        bench_config(k=args.k, entropy_threshold=t)


def cmd_remote_bench(args) -> int:
    import torch

    from specdec_core.evaluation.bench.remote import format_report, run_remote_bench

    torch.set_num_threads(args.threads)
    cfg = DecodeConfig(k=args.k, cache_check_every=0)
    remote = open_backend(args, cfg)
    local = remote.base
    res = run_remote_bench(local, remote, _prompts(local, args), k=args.k, repeats=args.repeats,
                           log=lambda s: print(s, file=sys.stderr))
    res["backend"] = args.backend
    print(format_report(res))
    if args.json:
        write_json(args.json, res)
    return 0 if res["identical_outputs"] else 1
