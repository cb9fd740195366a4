"""`python -m specdec_core bench`: SpecScope vs HF assisted generation vs cloud-only, one process.

Every method decodes the same prompts with greedy verification, the same k and the same stops;
runs are interleaved (the method order rotates every repeat) and medians are reported, so the
ratios printed come from one run on one machine. Outputs must agree token for token, or the
benchmark fails: a fast decoder that says something else is not faster.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch

from specdec_core.decoding.baseline import cloud_only, id_criteria
from specdec_core.decoding.config import DecodeConfig
from specdec_core.decoding.decoder import SpeculativeDecoder
from specdec_core.errors import UserError
from specdec_core.decoding.stopping import StopChecker
from specdec_core.decoding.vocab import TokenClasses

METHODS = ("cloud_only", "cloud_loop", "hf_assisted", "ours_traced", "ours_untraced")


def predicted_speedup(alpha: float, k: int, c: float) -> float:
    """Leviathan et al. (2023), eq. for the walltime improvement with k drafts per round."""
    if alpha >= 1.0:
        return (k + 1) / (k * c + 1)
    return (1 - alpha ** (k + 1)) / ((1 - alpha) * (k * c + 1))


def _stops(backend, prompt, cfg):
    classes = TokenClasses.for_tokenizer(backend.tokenizer)
    sentence = classes.ids("sentence_end") if cfg.stop_at_first_sentence else None
    return StopChecker(backend.stop_ids, sentence, prompt.length, cfg.min_new_tokens, cfg.max_new_tokens)


@torch.inference_mode()
def hf_assisted(backend, prompt, cfg) -> list[int]:
    """transformers' assisted generation: constant schedule, k drafts, confidence threshold off."""
    dev = next(backend.cloud.parameters()).device
    out = backend.cloud.generate(
        input_ids=prompt.input_ids.to(dev), attention_mask=torch.ones_like(prompt.input_ids).to(dev),
        **prompt.prefill_kwargs, assistant_model=backend.edge, do_sample=False,
        num_assistant_tokens=cfg.k, num_assistant_tokens_schedule="constant",
        assistant_confidence_threshold=0.0, max_new_tokens=cfg.max_new_tokens,
        eos_token_id=list(backend.stop_ids), pad_token_id=backend.stop_ids[0],
        stopping_criteria=id_criteria(_stops(backend, prompt, cfg)), temperature=None, top_p=None, top_k=None)
    return _cut_at_stop(out[0, prompt.length:].tolist(), _stops(backend, prompt, cfg))


def _cut_at_stop(ids: list[int], stops) -> list[int]:
    """HF assisted generation evaluates stopping criteria only on the last token of an accepted
    block, so it can run up to k tokens past the first-sentence stop; cut its output where the
    same id rule stops (the overshoot stays in its time)."""
    for n, tok in enumerate(ids, 1):
        if stops.check(n, tok):
            return ids[:n]
    return ids


@torch.inference_mode()
def cloud_loop(backend, prompt, cfg) -> list[int]:
    """The cloud alone in a minimal greedy loop on our runner: one forward per token and no
    framework overhead, the cost model the speculative-decoding formula assumes."""
    runner = backend.make_runner(backend.cloud, "cloud")
    runner.prefill(prompt)
    stops, ids, nxt = _stops(backend, prompt, cfg), [], [int(prompt.input_ids[0, -1])]
    while True:
        tok = int(runner.feed(nxt)[-1].argmax())
        ids.append(tok)
        if stops.check(len(ids), tok):
            return ids
        nxt = [tok]


def _ours(traced: bool):
    def run(backend, prompt, cfg):
        return SpeculativeDecoder(backend, cfg, trace=traced).run(prompt).token_ids
    return run


RUNNERS = {"cloud_only": lambda b, p, c: cloud_only(b, p, c)["token_ids"], "cloud_loop": cloud_loop,
           "hf_assisted": hf_assisted, "ours_traced": _ours(True), "ours_untraced": _ours(False)}


@torch.inference_mode()
def forward_cost_ratio(backend, prompt, n: int = 200) -> dict:
    """c = time of one edge forward / one cloud forward: 1 token with a warm cache at the
    prompt's length, edge and cloud interleaved so that machine noise hits both, medians of n."""
    runners = {}
    for role, model in (("edge", backend.edge), ("cloud", backend.cloud)):
        r = backend.make_runner(model, role)
        r.prefill(prompt)
        r.feed([int(prompt.input_ids[0, -1])])
        runners[role] = r
    last = [int(prompt.input_ids[0, -1])]
    times = {"edge": [], "cloud": []}
    for _ in range(n):
        for role, r in runners.items():
            r.crop(prompt.length - 1)
            t0 = time.perf_counter()
            r.feed(last)
            times[role].append(time.perf_counter() - t0)
    out = {role: statistics.median(v) for role, v in times.items()}
    out["c"] = out["edge"] / out["cloud"]
    return out


def run_bench(backend, prompts: list, k: int = 4, repeats: int = 3, sweep: bool = False,
              log=print) -> dict:
    cfg = DecodeConfig(k=k, cache_check_every=0)
    outputs, stats = {}, {"accepted": 0, "drafted": 0, "calls": 0, "committed": 0}
    for i, p in enumerate(prompts):               # warm-up, and the outputs to compare
        outputs[i] = {m: RUNNERS[m](backend, p, cfg) for m in METHODS}
        tr = SpeculativeDecoder(backend, cfg).run(p)
        for r in tr.rounds:
            if r.verified:
                stats["accepted"] += r.accepted
                stats["drafted"] += r.drafted
                stats["calls"] += 1
                stats["committed"] += r.committed
    mismatches = [(i, m) for i, o in outputs.items() for m in METHODS if o[m] != o["cloud_only"]]
    times = {m: [] for m in METHODS}
    for rep in range(repeats):
        order = METHODS[rep % len(METHODS):] + METHODS[: rep % len(METHODS)]
        tot = dict.fromkeys(METHODS, 0.0)
        for p in prompts:
            for m in order:
                t0 = time.perf_counter()
                RUNNERS[m](backend, p, cfg)
                tot[m] += time.perf_counter() - t0
        for m in METHODS:
            times[m].append(tot[m])
        log(f"repeat {rep + 1}/{repeats}: " + "  ".join(f"{m}={tot[m]:.3f}s" for m in METHODS))
    med = {m: statistics.median(v) for m, v in times.items()}
    alpha = stats["accepted"] / stats["drafted"] if stats["drafted"] else 0.0
    cost = forward_cost_ratio(backend, prompts[0])
    pred = predicted_speedup(alpha, k, cost["c"])
    res = {
        "k": k, "repeats": repeats, "clips": len(prompts),
        "tokens": sum(len(o["cloud_only"]) for o in outputs.values()),
        "identical_outputs": not mismatches, "mismatches": mismatches,
        "wall_s": {m: round(v, 4) for m, v in med.items()},
        "ours_vs_hf_assisted": round(med["ours_traced"] / med["hf_assisted"], 4),
        "tracing_overhead": round(med["ours_traced"] / med["ours_untraced"] - 1, 4),
        "alpha": round(alpha, 4),
        "mean_accepted_length": round(stats["committed"] / max(1, stats["calls"]), 4),
        "edge_forward_s": cost["edge"], "cloud_forward_s": cost["cloud"], "c": round(cost["c"], 4),
        "predicted_speedup": round(pred, 4),
        "achieved_speedup": round(med["cloud_only"] / med["ours_traced"], 4),
        "achieved_speedup_vs_loop": round(med["cloud_loop"] / med["ours_traced"], 4),
        "hf_assisted_speedup": round(med["cloud_only"] / med["hf_assisted"], 4),
    }
    res["achieved_over_predicted"] = round(res["achieved_speedup_vs_loop"] / pred, 4)
    if sweep:
        res["sweep"] = k_sweep(backend, prompts, cost["c"], log=log)
    return res


def k_sweep(backend, prompts, c: float, ks=range(1, 9), repeats: int = 3, log=print) -> list[dict]:
    """Predicted vs achieved speedup per k. Like the main run, every repeat times the cloud loop
    and each k in a rotated order, so machine noise is spread over all of them."""
    ks = list(ks)
    stats = {k: [0, 0] for k in ks}
    for k in ks:   # acceptance per k (deterministic: greedy)
        for p in prompts:
            tr = SpeculativeDecoder(backend, DecodeConfig(k=k, cache_check_every=0)).run(p)
            stats[k][0] += sum(r.accepted for r in tr.rounds if r.verified)
            stats[k][1] += sum(r.drafted for r in tr.rounds if r.verified)
    jobs = ["base"] + ks
    times = {j: [] for j in jobs}
    for rep in range(repeats):
        for j in jobs[rep % len(jobs):] + jobs[: rep % len(jobs)]:
            t0 = time.perf_counter()
            for p in prompts:
                if j == "base":
                    cloud_loop(backend, p, DecodeConfig(cache_check_every=0))
                else:
                    SpeculativeDecoder(backend, DecodeConfig(k=j, cache_check_every=0)).run(p)
            times[j].append(time.perf_counter() - t0)
    base_t = statistics.median(times["base"])
    rows = []
    for k in ks:
        a = stats[k][0] / stats[k][1] if stats[k][1] else 0.0
        row = {"k": k, "alpha": round(a, 4), "predicted": round(predicted_speedup(a, k, c), 4),
               "achieved": round(base_t / statistics.median(times[k]), 4)}
        rows.append(row)
        log(f"k={k}: alpha={row['alpha']:.3f} predicted={row['predicted']:.3f} achieved={row['achieved']:.3f}")
    return rows


def plot_sweep(rows: list[dict], path: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    ks = [r["k"] for r in rows]
    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=120)
    ax.plot(ks, [r["predicted"] for r in rows], "o--", label="predicted (Leviathan et al.)")
    ax.plot(ks, [r["achieved"] for r in rows], "s-", label="achieved (vs cloud loop)")
    ax.set_xlabel("k (draft tokens per round)")
    ax.set_ylabel("speedup over cloud-only")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    return path


def sample_prompts(backend, n: int = 0) -> list:
    from specdec_core.api import prepare
    from specdec_core.evaluation.batch import read_manifest

    manifest = Path(__file__).resolve().parents[2] / "sample_audio" / "manifest.csv"
    clips = read_manifest(manifest)
    if n:
        clips = clips[:n]
    return [prepare(backend, c.path, DecodeConfig(prompt_type=c.prompt_type or "detailed")) for c in clips]


def cmd_bench(args) -> int:
    if getattr(args, "cloud_url", None):   # local cloud vs the same cloud behind the server
        from specdec_core.evaluation.remote_bench import cmd_remote_bench

        return cmd_remote_bench(args)
    from specdec_core.backends import load_backend
    from specdec_core.cli import backend_options

    # Tiny models run fastest on one thread, and a fixed count keeps repeats comparable when
    # something else shares the cores (oversubscribed OpenMP threads spin and distort timings).
    torch.set_num_threads(args.threads)
    backend = load_backend(args.backend, **backend_options(args))
    if not backend.needs_audio:
        prompts = [backend.build_inputs(None, "detailed")]
    else:
        prompts = sample_prompts(backend, args.clips)
    if not prompts:
        raise UserError("no prompts to benchmark")
    res = run_bench(backend, prompts, k=args.k, repeats=args.repeats, sweep=args.sweep,
                    log=lambda s: print(s, file=sys.stderr))
    res["backend"] = args.backend
    res["torch_threads"] = torch.get_num_threads()
    print(format_report(res))
    if args.json:
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        if "sweep" in res:
            png = plot_sweep(res["sweep"], out.with_suffix(".sweep.png"))
            res["sweep_plot"] = str(png) if png else None
        out.write_text(json.dumps(res, indent=1), encoding="utf-8")
    return 0 if res["identical_outputs"] else 1


def format_report(r: dict) -> str:
    w = r["wall_s"]
    lines = [f"backend={r.get('backend')} k={r['k']} clips={r['clips']} tokens={r['tokens']} "
             f"repeats={r['repeats']} identical_outputs={r['identical_outputs']}",
             "wall time (median, s): " + "  ".join(f"{m}={w[m]:.3f}" for m in METHODS)]
    for key in ("ours_vs_hf_assisted", "tracing_overhead", "alpha", "mean_accepted_length", "c",
                "predicted_speedup", "achieved_speedup", "achieved_speedup_vs_loop",
                "hf_assisted_speedup", "achieved_over_predicted"):
        lines.append(f"{key:26s} {r[key]}")
    return "\n".join(lines)
