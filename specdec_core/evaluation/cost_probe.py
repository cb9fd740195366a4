"""The bench's cost probe: measures the cost model's inputs inside the interleaved timing loop.

See cost_model.py for the model and docs/benchmarks.md ("The measured cost model") for how the
numbers are used.
"""
from __future__ import annotations

import statistics

from specdec_core.evaluation.cost_model import (FORMULA, Costs, cloud_token_time, conditional_acceptance,
                                                decode_overheads, default_clock, forward_timer,
                                                measure_widths, predict_speedup, round_time,
                                                tokens_per_round)


def median(xs, default=0.0):
    return statistics.median(xs) if xs else default


def mean(xs, default=0.0):
    """The estimator of a cost: the MEAN of its samples. On a shared machine preemption spikes
    hit the many short edge forwards of a round more than the cloud loop's long forwards, and a
    median, which ignores them, predicted SD 25% too fast under load; the mean is what adds up
    to a wall time (on a quiet machine the two agree)."""
    return statistics.fmean(xs) if xs else default


class CostProbe:
    """A job of the bench's interleaved timing loop (bench.time_jobs calls it once per prompt per
    repeat, in the rotating order of the other methods): per prompt it (1) decodes with the
    traced decoder under forward_timer (rounds' time outside the forwards, prefills, the trace's
    acceptance), (2) runs the minimal cloud loop the same way (its time per token outside the
    forward), (3) times forwards of every width at the run's typical cache length (measure_widths).
    `summary` turns each repeat's samples into Costs and a prediction."""

    def __init__(self, prompts: list, outputs: list[list[int]], widths, reps: int = 1, clock=None):
        self.prompts, self.outputs = prompts, outputs
        self.clock = clock        # (function, name); None: default_clock of the first backend
        self.widths, self.reps = sorted(set(widths)), reps
        self.index = {id(p): i for i, p in enumerate(prompts)}
        # typical cache length at a verify forward: the prompt plus half the generated tokens
        self.cache_len = round(statistics.fmean(p.length + len(o) / 2 for p, o in zip(prompts, outputs)))
        self.calls = 0
        self.samples: list[dict] = []      # one per repeat
        self.rounds: list = []             # the traced decodes' rounds (first repeat)

    def _repeat(self) -> dict:
        rep = self.calls // max(1, len(self.prompts))
        while len(self.samples) <= rep:
            self.samples.append({"widths": {"edge": {}, "cloud": {}}, "sd": [], "loop": [], "in_run": {}})
        return self.samples[rep]

    def __call__(self, backend, prompt, cfg):
        from specdec_core.decoding.decoder import SpeculativeDecoder
        from specdec_core.evaluation.bench import cloud_loop

        s = self._repeat()
        self.calls += 1
        if self.clock is None:
            self.clock = default_clock(backend)
        clock = self.clock[0]
        with forward_timer(backend, clock) as ev:
            t0 = clock()
            tr = SpeculativeDecoder(backend, cfg).run(prompt)
            t1 = clock()
        s["sd"].append(decode_overheads(ev, t0, t1))
        for e in ev:
            if e.cache_len > 0:
                s["in_run"].setdefault(e.role, {}).setdefault(e.width, []).append(e.dt)
        if len(self.samples) == 1:
            self.rounds.append(tr.rounds)
        with forward_timer(backend, clock) as ev:
            t0 = clock()
            cloud_loop(backend, prompt, cfg)
            t1 = clock()
        s["loop"].append(decode_overheads(ev, t0, t1))
        i = self.index.get(id(prompt), 0)
        measure_widths(backend, prompt, self.outputs[i], max(self.cache_len, prompt.length), self.widths,
                       self.reps, s["widths"], clock)
        return tr.token_ids

    @staticmethod
    def costs_of(s: dict, k: int) -> Costs:
        """One repeat's samples -> Costs (means, see _mean)."""
        w = {role: {x: mean(v) for x, v in d.items()} for role, d in s["widths"].items()}
        o_r = mean([x for d in s["sd"] for x in d["rounds"]])
        o_t = mean([x for d in s["loop"] for x in d["rounds"]])
        pre = {role: mean([d["prefill"][role] for d in s["sd"] if role in d["prefill"]])
               for role in ("edge", "cloud")}
        pre_loop = mean([d["prefill"]["cloud"] for d in s["loop"] if "cloud" in d["prefill"]])
        f_sd = mean([d["rest"] for d in s["sd"]]) - o_r + pre["edge"] + pre["cloud"]
        f_loop = mean([d["rest"] for d in s["loop"]]) - o_t + pre_loop
        return Costs(edge=w["edge"], cloud=w["cloud"], round_overhead=o_r, k_ref=k, token_overhead=o_t,
                     decode_sd=max(0.0, f_sd), decode_loop=max(0.0, f_loop))

    def median_costs(self, k: int) -> Costs:
        """Costs from all repeats: medians of the per-repeat (mean) values."""
        per = [self.costs_of(s, k) for s in self.samples]
        med = lambda f: statistics.median(f(c) for c in per)  # noqa: E731
        roles = {role: {w: med(lambda c, w=w, role=role: getattr(c, role)[w]) for w in getattr(per[0], role)}
                 for role in ("edge", "cloud")}
        return Costs(edge=roles["edge"], cloud=roles["cloud"], k_ref=k,
                     round_overhead=med(lambda c: c.round_overhead), token_overhead=med(lambda c: c.token_overhead),
                     decode_sd=med(lambda c: c.decode_sd), decode_loop=med(lambda c: c.decode_loop))

    def in_run_forwards(self) -> dict:
        """Forward time by width as the traced decodes really ran them, pooled over
        repeats (a check on the microbenchmark; cache lengths vary around `cache_len` there):
        role -> {width: [mean s, median s, count]}."""
        pooled: dict = {}
        for s in self.samples:
            for role, d in s["in_run"].items():
                for w, xs in d.items():
                    pooled.setdefault(role, {}).setdefault(w, []).extend(xs)
        return {role: {w: [round(statistics.fmean(xs), 7), round(statistics.median(xs), 7), len(xs)]
                       for w, xs in sorted(d.items())}
                for role, d in pooled.items()}

    def acceptance(self) -> dict:
        return conditional_acceptance(r for rounds in self.rounds for r in rounds)

    def summary(self, k: int, achieved: list[float]) -> dict:
        """bench JSON `cost_model`: the measured costs (medians over repeats, and per repeat),
        the acceptance profile, and the prediction per repeat against that repeat's achieved
        speedup over the cloud loop."""
        acc = self.acceptance()
        tokens = sum(len(o) for o in self.outputs)
        n = tokens / max(1, len(self.outputs))
        per = [self.costs_of(s, k) for s in self.samples]
        preds = [predict_speedup(acc["profile"], k, c, n) for c in per]
        ratios = [a / p for a, p in zip(achieved, preds)]
        costs = self.median_costs(k)
        rng = lambda xs: [round(min(xs), 4), round(max(xs), 4)]  # noqa: E731
        return {**costs.to_dict(), "cache_len": self.cache_len, "estimator": "mean over samples, median over repeats",
                "clock": self.clock[1] if self.clock else None,
                "edge_logits": "last position (drafting)", "cloud_logits": "every position (verify)",
                "acceptance_profile": acc["profile"], "acceptance_judged": acc["judged"],
                "acceptance_accepted": acc["accepted"],
                "tokens_per_round": round(tokens_per_round(acc["profile"], k), 4),
                "tokens_per_decode": round(n, 2),
                "round_time_s": round(round_time(acc["profile"], k, costs), 7),
                "cloud_token_s": round(cloud_token_time(costs), 7),
                "predicted_speedup": round(statistics.median(preds), 4), "predicted_range": rng(preds),
                "predicted_long_decode": round(predict_speedup(acc["profile"], k, costs), 4),
                "achieved_over_predicted": round(statistics.median(ratios), 4),
                "achieved_over_predicted_range": rng(ratios),
                "in_run_forwards": self.in_run_forwards(),
                "per_repeat": [{"predicted": round(p, 4), "achieved_vs_loop": round(a, 4),
                                "round_overhead_s": round(c.round_overhead, 7),
                                "cloud_s": [round(c.cloud[w], 7) for w in sorted(c.cloud)],
                                "edge_s": [round(c.edge[w], 7) for w in sorted(c.edge)]}
                               for p, a, c in zip(preds, achieved, per)],
                "formula": FORMULA}
