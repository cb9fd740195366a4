"""`python -m specdec_core bench`: SpecScope vs HF assisted generation vs cloud-only, one process,
interleaved, outputs compared token for token (docs/benchmarks.md). The k and entropy threshold
sweeps live in bench_sweep.py."""
from __future__ import annotations

import time
from pathlib import Path

import torch

from specdec_core.decoding import tree_round
from specdec_core.decoding.baseline import cloud_only, greedy, id_criteria, stopper_for
from specdec_core.decoding.config import DecodeConfig
from specdec_core.decoding.decoder import SpeculativeDecoder
from specdec_core.evaluation.bench.cost_probe import CostProbe
from specdec_core.evaluation.bench.stats import paired, ratio, spread, time_jobs

METHODS = ("cloud_only", "cloud_loop", "hf_assisted", "ours_traced", "ours_untraced")


def predicted_speedup(alpha: float, k: int, c: float) -> float:
    """Leviathan et al. (2023), eq. for the walltime improvement with k drafts per round. Their
    α is the chance that a draft the cloud judges on a correct prefix is accepted: estimate it
    with `leviathan_alpha`, not with accepted / drafted (see there)."""
    if alpha >= 1.0:
        return (k + 1) / (k * c + 1)
    return (1 - alpha ** (k + 1)) / ((1 - alpha) * (k * c + 1))


def leviathan_alpha(accepted: int, rejections: int) -> float:
    """α of Leviathan et al.'s model from verified rounds: accepted / (accepted + rejections),
    the share of judged draft positions that were accepted (a round stops judging at its first
    rejection; the maximum-likelihood estimate under their independence assumption). The plain
    acceptance rate accepted / drafted also counts the drafts after a rejection, drawn on a wrong
    prefix and never judged, as failures: it understates α more the longer k is."""
    n = accepted + rejections
    return accepted / n if n else 0.0


def cost_model_speedup(tokens: int, target_forwards: int, draft_forwards: int, c: float) -> float:
    """Speedup over a cloud-only loop predicted from counted forwards: the loop spends one cloud
    forward per token, the decoder `target_forwards` cloud forwards and `draft_forwards` edge
    forwards that cost c each, so predicted = tokens / (target_forwards + c · draft_forwards)
    (decode forwards only). In classic mode with i.i.d. acceptance this is the Leviathan et al.
    expectation `predicted_speedup(α, k, c)`, without its assumptions (docs/benchmarks.md)."""
    cost = target_forwards + c * draft_forwards
    return tokens / cost if cost > 0 else float("inf")


def bench_config(**kw) -> DecodeConfig:
    """The benchmark's decode config: no cache-consistency checks (a debugging feature);
    thresholds are in nats whatever the config's default entropy unit is."""
    if kw.get("entropy_threshold") is not None:
        kw.setdefault("entropy_unit", "nats")
    return DecodeConfig(cache_check_every=0, **kw)


def hf_assisted(backend, prompt, cfg) -> list[int]:
    """transformers' assisted generation: constant schedule, k drafts, confidence threshold off."""
    stops = stopper_for(backend, prompt, cfg)
    ids, _ = greedy(backend.cloud, prompt.input_ids, cfg.max_new_tokens, list(backend.stop_ids), id_criteria(stops),
                    assistant_model=backend.edge, num_assistant_tokens=cfg.k, num_assistant_tokens_schedule="constant",
                    assistant_confidence_threshold=0.0, **prompt.prefill_kwargs)
    return _cut_at_stop(ids, stops)


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
    stops, ids, nxt = stopper_for(backend, prompt, cfg), [], [int(prompt.input_ids[0, -1])]
    while True:
        tok = int(runner.feed(nxt)[-1].argmax())
        ids.append(tok)
        if stops.check(len(ids), tok):
            return ids
        nxt = [tok]


def ours(traced: bool, compaction: str = "gather", whole: bool = False):
    """Our decoder as a bench runner, returning the token ids (whole: the trace); `compaction`: how a
    tree round keeps the accepted path in the cloud's cache (tree_round.COMPACTION)."""
    def run(backend, prompt, cfg):
        tree_round.COMPACTION = compaction
        try:
            tr = SpeculativeDecoder(backend, cfg, trace=traced, dependence=False).run(prompt)
            return tr if whole else tr.token_ids
        finally:
            tree_round.COMPACTION = "gather"
    return run


RUNNERS = {"cloud_only": lambda b, p, c: cloud_only(b, p, c)["token_ids"], "cloud_loop": cloud_loop,
           "hf_assisted": hf_assisted, "ours_traced": ours(True), "ours_untraced": ours(False)}


def decode_stats(backend, prompts, cfg: DecodeConfig, traces: list | None = None) -> dict:
    """From one traced decode per prompt (run here unless `traces` are given): the outputs,
    acceptance, cloud calls, counted decode forwards (the runners' counters minus the prompt
    prefill) and each round's highest draft entropy (what the entropy gate compares)."""
    s = {"outputs": [], "tokens": 0, "accepted": 0, "drafted": 0, "calls": 0, "committed": 0, "rejections": 0,
         "edge_only": 0, "target_forwards": 0, "draft_forwards": 0, "block_entropies": []}
    for p, tr in zip(prompts, traces or [SpeculativeDecoder(backend, cfg).run(p) for p in prompts]):
        m = tr.metrics     # runners count decode forwards only (the prompt rides in the first)
        s["outputs"].append(tr.token_ids)
        s["tokens"] += len(tr.tokens)
        s["edge_only"] += m["draft_only_tokens"]
        s["target_forwards"] += m["target_forwards"]
        s["draft_forwards"] += m["draft_forwards"]
        for r in tr.rounds:
            if r.verified:
                s["accepted"] += r.accepted
                s["drafted"] += r.drafted
                s["calls"] += 1
                s["committed"] += r.committed
                s["rejections"] += r.accepted < r.drafted
        s["block_entropies"] += [r.max_entropy for r in tr.rounds if r.max_entropy is not None]
    s["alpha"] = s["accepted"] / s["drafted"] if s["drafted"] else 0.0
    s["alpha_leviathan"] = leviathan_alpha(s["accepted"], s["rejections"])
    return s


def run_bench(backend, prompts: list, k: int = 4, repeats: int = 3, log=print, widths=None,
              clock: str = "wall", knobs: dict | None = None) -> dict:
    """The five methods at one k; speed-ups by stats.speedup. A cost probe runs inside the same
    interleaved loop, so every repeat gets its own measured costs and prediction; `widths`: forward
    widths to measure (default 1..k+1); clock="cpu" times jobs in process CPU time."""
    cfg = bench_config(k=k, **(knobs or {}))
    outputs = [{m: RUNNERS[m](backend, p, cfg) for m in METHODS} for p in prompts]  # + warm-up
    st = decode_stats(backend, prompts, cfg)
    mismatches = [(i, m) for i, o in enumerate(outputs) for m in METHODS if o[m] != o["cloud_only"]]
    probe = CostProbe(prompts, [o["cloud_only"] for o in outputs], widths or range(1, k + 2), cloud_loop)
    jobs = {**{m: (RUNNERS[m], cfg) for m in METHODS}, "cost_probe": (probe, cfg)}
    times, _ = time_jobs(backend, prompts, jobs, repeats, log,
                         clock=time.process_time if clock == "cpu" else time.perf_counter)
    # c = e(1) / v(1): the cost probe's one-token forwards, on its clock, medians over repeats
    costs = probe.median_costs(k)
    e1, v1 = costs.forward("edge", 1), costs.forward("cloud", 1)
    pred = predicted_speedup(st["alpha_leviathan"], k, e1 / v1)
    res = {"k": k, "repeats": repeats, "clips": len(prompts), "clock": clock, "knobs": knobs or {},
           "tokens": sum(len(o["cloud_only"]) for o in outputs),
           "identical_outputs": not mismatches, "mismatches": mismatches,
           "identical_clips": sum(all(o[m] == o["cloud_only"] for m in METHODS) for o in outputs),
           "wall_s": {}, "wall_s_range": {}}
    for m in METHODS:
        res["wall_s"][m], res["wall_s_range"][m] = spread(times[m])
    ratios = {"ours_vs_hf_assisted": ("ours_traced", "hf_assisted"),
              "achieved_speedup": ("cloud_only", "ours_traced"),
              "achieved_speedup_vs_loop": ("cloud_loop", "ours_traced"),
              "untraced_speedup": ("cloud_only", "ours_untraced"),
              "untraced_speedup_vs_loop": ("cloud_loop", "ours_untraced"),
              "hf_assisted_speedup": ("cloud_only", "hf_assisted")}
    for key, (num, den) in ratios.items():
        res[key], res[key + "_range"] = ratio(times[num], times[den])
    over, rng = ratio(times["ours_traced"], times["ours_untraced"])
    res["tracing_overhead"], res["tracing_overhead_range"] = round(over - 1, 4), [round(x - 1, 4) for x in rng]
    res.update({
        "alpha": round(st["alpha"], 4), "alpha_leviathan": round(st["alpha_leviathan"], 4),
        "mean_accepted_length": round(st["committed"] / max(1, st["calls"]), 4),
        "cloud_calls_per_token": round(st["calls"] / max(1, st["tokens"]), 4),
        "target_forwards": st["target_forwards"], "draft_forwards": st["draft_forwards"],
        "edge_forward_s": e1, "cloud_forward_s": v1, "c": round(e1 / v1, 4),
        "leviathan_predicted": round(pred, 4),
        "predicted_from_forwards": round(cost_model_speedup(
            st["tokens"], st["target_forwards"], st["draft_forwards"], e1 / v1), 4)})
    # the measured cost model: one prediction per repeat from that repeat's costs, compared with
    # that repeat's achieved speedup over the cloud loop (both sides of every ratio timed together)
    achieved = paired(times["cloud_loop"], times["ours_traced"])
    model = probe.summary(k, achieved)
    res["cost_model"] = model
    res.update({key: model[key] for key in ("predicted_speedup", "achieved_over_predicted",
                                            "achieved_over_predicted_range")})
    res["achieved_over_leviathan"] = round(res["achieved_speedup_vs_loop"] / pred, 4)
    res["achieved_over_leviathan_range"] = [round(x / pred, 4) for x in res["achieved_speedup_vs_loop_range"]]
    return res


def sample_prompts(backend, n: int = 0) -> list:
    from specdec_core.api import prepare
    from specdec_core.evaluation.batch.manifest import read_manifest

    manifest = Path(__file__).resolve().parents[3] / "sample_audio" / "manifest.csv"
    clips = read_manifest(manifest)
    if n:
        clips = clips[:n]
    return [prepare(backend, c.path, DecodeConfig(prompt_type=c.prompt_type or "detailed")) for c in clips]
