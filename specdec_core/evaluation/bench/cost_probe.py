"""Measuring the cost model's inputs (cost_model.py is the model): forward hooks that time each
forward, a forward-width microbenchmark, a decode's time outside its forwards, and the bench's
CostProbe."""
from __future__ import annotations

import statistics

import time
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from specdec_core.compat import forward_cache
from specdec_core.decoding.decoder import SpeculativeDecoder
from specdec_core.evaluation.bench.cost_model import (FORMULA, Costs, cloud_token_time, conditional_acceptance,
                                                predict_speedup, round_time, tokens_per_round)
from specdec_core.evaluation.bench.stats import paired, spread


def default_clock(backend):
    """The clock costs are measured with: the process's CPU time when both models run on the
    CPU (it predicts the ratio of two wall times on a loaded machine), wall time otherwise;
    docs/benchmarks.md, "Clock"."""
    devs = {p.device.type for m in (backend.edge, backend.cloud) for p in list(m.parameters())[:1]}
    return (time.process_time, "cpu") if devs == {"cpu"} else (time.perf_counter, "wall")


@dataclass
class Fwd:
    role: str
    width: int
    cache_len: int
    t0: float
    t1: float

    @property
    def dt(self) -> float:
        return self.t1 - self.t0


@contextmanager
def forward_timer(backend, clock=time.perf_counter):
    """Times every forward of the backend's two models while open (forward hooks, removed on
    exit): a list of Fwd in call order, times from `clock`. A model that is both edge and cloud
    is `cloud`."""
    events: list[Fwd] = []
    handles = []
    roles = {"edge": backend.edge, "cloud": backend.cloud}
    if backend.edge is backend.cloud:
        roles.pop("edge")
    for role, model in roles.items():
        start: dict = {}

        def pre(mod, args, kw, start=start):
            cache = forward_cache(mod, args, kw)
            start["n"] = cache.get_seq_length() if cache is not None and hasattr(cache, "get_seq_length") else 0
            start["t0"] = clock()

        def post(mod, args, kw, out, role=role, start=start):
            t1 = clock()
            ids = kw.get("input_ids", args[0] if args else None)
            events.append(Fwd(role, int(ids.shape[-1]) if ids is not None else 0, start["n"], start["t0"], t1))
        handles += [model.register_forward_pre_hook(pre, with_kwargs=True),
                    model.register_forward_hook(post, with_kwargs=True)]
    try:
        yield events
    finally:
        for h in handles:
            h.remove()


@torch.inference_mode()
def measure_widths(backend, prompt, ids: list[int], cache_len: int, widths, reps: int = 2,
                   out: dict | None = None, clock=time.perf_counter) -> dict:
    """Forward time of w new tokens (w in `widths`) at cache length `cache_len`, each model in the mode
    the decoder uses it, interleaved, `reps` times each, appended to out[role][w] (a second one-token
    edge forward to out["edge_warm"][1]); `ids` fill the cache after the prompt."""
    out = out if out is not None else {"edge": {}, "cloud": {}}
    need = cache_len - prompt.length + 1 + max(widths)
    fill = (list(ids) or [int(prompt.input_ids[0, -1])])
    fill = (fill + [fill[-1]] * need)[:need]
    head = [int(prompt.input_ids[0, -1])] + fill
    base = cache_len - (prompt.length - 1)            # ids fed after the prompt prefill
    runners = {}
    for role, model, last in (("edge", backend.edge, True), ("cloud", backend.cloud, False)):
        r = backend.make_runner(model, role)
        r.prefill(prompt)
        r.feed(head[:base], last_only=True)
        runners[role] = (r, last)
    for _ in range(reps):
        for w in widths:
            for role, (r, last) in runners.items():
                block = head[base: base + w]
                t0 = clock()
                r.feed(block, last_only=last)
                dt = clock() - t0
                if role == "edge" and w == 1:   # and the next draft forward, weights now warm
                    t0 = clock()
                    r.feed(head[base + 1: base + 2], last_only=True)
                    out.setdefault("edge_warm", {}).setdefault(1, []).append(clock() - t0)
                r.crop(cache_len)
                out[role].setdefault(w, []).append(dt)
    return out


def timed(backend, clock, run) -> tuple:
    """run() with every forward timed: (what it returned, its forward events, their
    decode_overheads)."""
    with forward_timer(backend, clock) as ev:
        t0 = clock()
        out = run()
        t1 = clock()
    return out, ev, decode_overheads(ev, t0, t1)


def decode_overheads(events: list[Fwd], t0: float, t1: float) -> dict:
    """A decode's time outside the forwards: `rounds` - for each span between the ends of two
    consecutive cloud decode forwards (one round), the span minus the forwards in it; `fixed` - the
    rest outside forwards minus one round's median overhead; `prefill` - each model's prompt-prefill
    forward. For a cloud-only loop every cloud forward ends a "round" of one token."""
    cloud = [i for i, e in enumerate(events) if e.role == "cloud" and e.cache_len > 0]
    prefill = {e.role: e.dt for e in events if e.cache_len == 0 and e.width > 1}
    spans = []
    for a, b in zip(cloud, cloud[1:]):
        inside = sum(e.dt for e in events[a + 1: b + 1])
        spans.append(events[b].t1 - events[a].t1 - inside)
    outside = (t1 - t0) - sum(e.dt for e in events)
    rest = outside - sum(spans)
    return {"rounds": spans, "outside": outside, "rest": rest, "prefill": prefill,
            "n_rounds": len(cloud)}


def mean(xs, default=0.0):
    """The estimator of a cost: the MEAN of its samples. On a shared machine preemption spikes
    hit the many short edge forwards of a round more than the cloud loop's long forwards, and a
    median, which ignores them, predicted SD 25% too fast under load; the mean is what adds up
    to a wall time (on a quiet machine the two agree)."""
    return statistics.fmean(xs) if xs else default


class CostProbe:
    """A job of the bench's interleaved timing loop, once per prompt per repeat: a traced decode,
    the minimal cloud loop and the forwards by width; `summary` turns the samples into Costs."""

    def __init__(self, prompts: list, outputs: list[list[int]], widths, loop, reps: int = 1, clock=None):
        self.prompts, self.outputs, self.loop = prompts, outputs, loop   # loop: bench.cloud_loop
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
        s = self._repeat()
        self.calls += 1
        if self.clock is None:
            self.clock = default_clock(backend)
        clock = self.clock[0]
        tr, ev, sd = timed(backend, clock, lambda: SpeculativeDecoder(backend, cfg, dependence=False).run(prompt))
        s["sd"].append(sd)
        for e in ev:
            if e.cache_len > 0:
                s["in_run"].setdefault(e.role, {}).setdefault(e.width, []).append(e.dt)
        if len(self.samples) == 1:
            self.rounds.append(tr.rounds)
        s["loop"].append(timed(backend, clock, lambda: self.loop(backend, prompt, cfg))[2])
        i = self.index.get(id(prompt), 0)
        measure_widths(backend, prompt, self.outputs[i], max(self.cache_len, prompt.length), self.widths,
                       self.reps, s["widths"], clock)
        return tr.token_ids

    @staticmethod
    def costs_of(s: dict, k: int) -> Costs:
        """One repeat's samples -> Costs (means, see _mean)."""
        w = {role: {x: mean(v) for x, v in d.items()} for role, d in s["widths"].items()}
        warm = w.get("edge_warm", {}).get(1)
        o_r = mean([x for d in s["sd"] for x in d["rounds"]])
        o_t = mean([x for d in s["loop"] for x in d["rounds"]])
        pre = {role: mean([d["prefill"][role] for d in s["sd"] if role in d["prefill"]])
               for role in ("edge", "cloud")}
        pre_loop = mean([d["prefill"]["cloud"] for d in s["loop"] if "cloud" in d["prefill"]])
        f_sd = mean([d["rest"] for d in s["sd"]]) - o_r + pre["edge"] + pre["cloud"]
        f_loop = mean([d["rest"] for d in s["loop"]]) - o_t + pre_loop
        return Costs(edge=w["edge"], cloud=w["cloud"], round_overhead=o_r, k_ref=k, token_overhead=o_t,
                     decode_sd=max(0.0, f_sd), decode_loop=max(0.0, f_loop), edge_warm=warm)

    def median_costs(self, k: int) -> Costs:
        """Costs from all repeats: medians of the per-repeat (mean) values."""
        per = [self.costs_of(s, k) for s in self.samples]
        kw = {f: statistics.median(getattr(c, f) for c in per)
              for f in ("round_overhead", "token_overhead", "decode_sd", "decode_loop", "edge_warm")
              if getattr(per[0], f) is not None}
        kw.update({role: {w: statistics.median(getattr(c, role)[w] for c in per) for w in getattr(per[0], role)}
                   for role in ("edge", "cloud")})
        return Costs(k_ref=k, **kw)

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
        ratios = paired(achieved, preds)
        costs = self.median_costs(k)
        return {**costs.to_dict(), "cache_len": self.cache_len, "estimator": "mean over samples, median over repeats",
                "clock": self.clock[1] if self.clock else None,
                "edge_logits": "last position (drafting)", "cloud_logits": "every position (verify)",
                "acceptance_profile": acc["profile"], "acceptance_judged": acc["judged"],
                "acceptance_accepted": acc["accepted"],
                "tokens_per_round": round(tokens_per_round(acc["profile"], k), 4),
                "tokens_per_decode": round(n, 2),
                "round_time_s": round(round_time(acc["profile"], k, costs), 7),
                "cloud_token_s": round(cloud_token_time(costs), 7),
                "predicted_speedup": spread(preds)[0], "predicted_range": spread(preds)[1],
                "predicted_long_decode": round(predict_speedup(acc["profile"], k, costs), 4),
                "achieved_over_predicted": spread(ratios)[0], "achieved_over_predicted_range": spread(ratios)[1],
                "in_run_forwards": self.in_run_forwards(),
                "per_repeat": [{"predicted": round(p, 4), "achieved_vs_loop": round(a, 4),
                                "round_overhead_s": round(c.round_overhead, 7),
                                "cloud_s": [round(c.cloud[w], 7) for w in sorted(c.cloud)],
                                "edge_s": [round(c.edge[w], 7) for w in sorted(c.edge)]}
                               for p, a, c in zip(preds, achieved, per)],
                "formula": FORMULA}
