"""The audit's checks, registered on the one registry (recorder/checks/registry.py) with scope "request" (one
`Run`: an audited request, its reference, its replayed drafter and, when known, each speculative step's place in
the output) or "run" (every request), the served-engine codes registered below with their facts."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from specdec_core.analysis.changepoint import change_point, window_arithmetic
from specdec_core.findings import finding, register
from specdec_core.recorder.checks.registry import check

# the served-engine codes (issue 49; docs/audit.md), registered where they are found
register("spec_never_drafted", "warning", "the served engine drafted nothing: its speculative "
         "decoding was not exercised (inconclusive, never a pass)",
         "0 draft tokens over every audited request", source="audit")
register("spec_counters", "error", "the engine's speculative counters contradict each other "
         "(zeroed, double-counted or stale)", "Σ per-step ≠ totals, Σ histogram ≠ steps, "
         "Σ j·h[j] ≠ accepted, mean acceptance length ≠ 1 + accepted / steps, or fewer output "
         "tokens than the steps commit", source="audit")
register("replay_mismatch", "warning", "the engine's accepted count is not what the exact greedy "
         "rule gives for the declared drafter's proposals (another drafter, or another rule): a "
         "speed cost, not an error while the output matches the reference (lossless_violation "
         "is that)",
         "with --replay: a step whose accepted count differs from the replayed drafts' match with "
         "the output", source="audit")

MIN_TOL = 1e-4           # log-probs: the smallest and largest gap a near-tie flip may have (the
MAX_TOL = 0.5            # measured disagreement x 4 in between; more: not the same model's numerics)
MIN_STEPS = 3            # steps before and after a collapse


@dataclass
class Run:
    name: str
    served: object                 # served.Served
    ref_ids: list[int] | None = None
    ref_top: list[dict] | None = None
    starts: list[int] | None = None     # output index each speculative step begins at
    replayed: list[list[int]] = field(default_factory=list)   # the replayed drafts per step
    rep: object = None             # served.Replay, the declared drafter replayed (or None)
    misfit: str | None = None      # the drafter kind the counts show when the replay does not fit

    @property
    def steps(self) -> list[tuple[int, int]]:
        s = self.served.spec or {}
        return list(zip(s.get("per_step_accepted") or [], s.get("per_step_drafted") or []))


@check("spec_never_drafted", scope="run", order=10)
def never_drafted(runs: list[Run]) -> list:
    """Inconclusive, never a pass: no request had a single drafted token."""
    with_spec = [r for r in runs if r.served.spec is not None]
    if not with_spec or any((r.served.spec.get("num_draft_tokens") or 0) > 0 for r in with_spec):
        return []
    n = sum(len(r.served.ids) for r in with_spec)
    return [finding("spec_never_drafted", f"the engine drafted nothing over {len(with_spec)} request(s) ({n} "
                    "output tokens): speculative decoding was not exercised", "every request reports 0 draft "
                    "tokens; a lossless output and a clean counter check say nothing about the drafter",
                    cause="the drafter never ran: not configured for this model, a fallback to the target alone, "
                    "an n-gram rule that found no match, or drafts disabled past a length", fix="check the "
                    "server's --speculative-config and its log; audit with prompts the drafter can match "
                    "(n-gram: repetitive text)", evidence={"requests": len(with_spec), "output_tokens": n})]


@check("numeric_divergence", "lossless_violation", scope="request", order=10)
def divergence(run: Run) -> list:
    """The first greedy divergence from the reference, judged by the reference's top-2 margin
    against the two stacks' measured disagreement on the positions before it."""
    got, ref = run.served.ids, run.ref_ids
    if ref is None:
        return []
    n = min(len(got), len(ref))
    i = next((j for j in range(n) if got[j] != ref[j]), None)
    if i is None:
        return []
    st, rt = run.served.top, run.ref_top
    noise = max([abs(st[j].get(got[j], 0.0) - rt[j].get(got[j], 0.0)) for j in range(i)
                 if got[j] in st[j] and got[j] in rt[j]] or [0.0])
    tol = round(min(max(4 * noise, MIN_TOL), MAX_TOL), 6)
    r_row, s_row = rt[i], st[i]
    ranked = sorted(r_row.values(), reverse=True)
    margin = round(ranked[0] - ranked[1], 6) if len(ranked) > 1 else None
    ref_gap = round(r_row[ref[i]] - r_row[got[i]], 6) if got[i] in r_row and ref[i] in r_row else None
    ev = {"request": run.name, "index": i, "served": got[i], "reference": ref[i],
          "margin_reference": margin, "gap_reference": ref_gap, "tolerance": tol,
          "noise_before": round(noise, 6),
          "margin_served": round(s_row[got[i]] - s_row[ref[i]], 6) if ref[i] in s_row else None}
    if ref_gap is not None and ref_gap <= tol:
        return [finding("numeric_divergence", f"{run.name}: the served output leaves the reference at token {i} "
                        f"by numerics, not a bug", f"the reference's top-1 - top-2 margin there is {margin} "
                        f"(log-probs), within what the two stacks disagree by on the {i} tokens before ({tol}): a "
                        "near-tie flipped", cause="two implementations (kernels, batch widths) round differently; a "
                        "near-tie can flip", fix="nothing to fix in the engine; compare more prompts, or in float32 "
                        "on both sides", evidence=ev)]
    return [finding("lossless_violation", f"{run.name}: the served greedy output is not the reference's at "
                    f"token {i} (a confident divergence)", f"the engine gave token {got[i]} where the reference's "
                    f"greedy is {ref[i]} with a top-1 - top-2 margin of {margin} log-probs"
                    + ("" if ref_gap is not None else f" (token {got[i]} is not even its top-2)")
                    + f"; the two stacks agree within {tol} on the {i} tokens before",
                    cause="speculation changed a greedy output: the acceptance rule, a corrupted draft/target "
                    "cache, or a bonus token from the wrong position (vllm #41758)", fix="rerun the same prompt "
                    "with speculation off on the same server; if that matches the reference, the spec path is at "
                    "fault: report it with this prompt", evidence=ev)]


@check("spec_counters", scope="request", order=20)
def counters(run: Run) -> list:
    """The engine's counters against their identities."""
    s = run.served.spec
    if not s:
        return []
    acc, dr, hist = s.get("per_step_accepted"), s.get("per_step_drafted"), s.get("acceptance_histogram") or []
    steps, accepted = s.get("num_spec_steps", 0), s.get("num_accepted_draft_tokens", 0)
    bad = []
    def want(what, got, expected, close=False):   # noqa: E306
        if (abs(got - expected) > 1e-9 * max(1, abs(expected))) if close else got != expected:
            bad.append(f"{what}: {got} where {expected}")
    if hist or "acceptance_histogram" in s:
        want("Σ histogram (steps)", sum(hist), steps)
        want("Σ j·h[j] (accepted)", sum(j * h for j, h in enumerate(hist)), accepted)
    if accepted > s.get("num_draft_tokens", 0):
        bad.append(f"accepted {accepted} drafts of {s.get('num_draft_tokens', 0)} drafted")
    if run.served.finish == "length" and len(run.served.ids) < 1 + accepted:
        bad.append(f"output length {len(run.served.ids)} is shorter than 1 + {accepted} accepted drafts")
    wide = s.get("server_wide") or {}    # llama-server's /metrics moved at least as much as this request
    for key, mine in (("drafted", s.get("num_draft_tokens", 0)), ("accepted", accepted), ("steps", steps)):
        if wide.get(key, mine) < mine:
            bad.append(f"the server-wide {key} count (/metrics) moved by {wide[key]} over this request of {mine}")
    if steps and "mean_acceptance_length" in s:      # (llama-server sends neither of these two)
        want("mean acceptance length", s.get("mean_acceptance_length", 0.0), 1 + accepted / steps, True)
    if s.get("num_draft_tokens") and "draft_acceptance_rate" in s:
        want("draft acceptance rate", s.get("draft_acceptance_rate", 0.0), accepted / s["num_draft_tokens"], True)
    if acc is not None and dr is not None:
        want("Σ per-step accepted", sum(acc), accepted)
        want("Σ per-step drafted", sum(dr), s.get("num_draft_tokens", 0))
        want("per-step count", len(acc), steps)
        if hist:
            want("per-step histogram", [Counter(acc).get(j, 0) for j in range(len(hist))], list(hist))
        over = [i for i, (a, d) in enumerate(zip(acc, dr)) if a > d]
        if over:
            bad.append(f"steps {over[:5]} accept more drafts than they drafted")
        n, least = len(run.served.ids), (1 + sum(a + 1 for a in acc[:-1]) + 1 if acc else 0)
        if n < least and run.served.finish == "length":
            bad.append(f"output length {n} is shorter than the {least} tokens its steps commit")
    if not bad:
        return []
    return [finding("spec_counters", f"{run.name}: the engine's speculative counters contradict each other "
                    f"({len(bad)} identit{'y' if len(bad) == 1 else 'ies'})", "; ".join(bad), cause="a counter "
                    "zeroed, double-counted or left from another request (TensorRT-LLM #17082, tokenspeed #1443)",
                    fix="trust the output, not the counters, until the engine's accounting is fixed; report the "
                    "identities broken", evidence={"request": run.name, "broken": bad})]


@check("not_judged", scope="run", order=90)
def not_judged(runs: list[Run]) -> list:
    said = list(dict.fromkeys(note for r in runs for note in r.served.notes))
    if unplaced := [r.name for r in runs if r.steps and r.starts is None]:
        said.append(f"{len(unplaced)} request(s) whose steps cannot be placed in the output (the counts show an "
                    "n-gram engine, drafting only where it matches: give --replay ngram): acceptance by context "
                    "position not judged")
    return [finding("not_judged", line.split(": ")[0].split(" (the counts")[0], line, severity="warning",
                    cause="what the engine sends does not carry what these checks need",
                    fix="see docs/audit.md, \"Turning the metrics on\"", evidence={"source": "audit"}) for line in said]


def by_draft_position(runs: list[Run]) -> list[dict]:
    """[{position j, drafted, accepted, rate}]: how often the j-th draft of a step was accepted."""
    from specdec_core.analysis.metrics import by_position

    return [{"position": j, "drafted": d, "accepted": a, "rate": round(a / d, 4)}
            for j, (d, a) in enumerate(by_position([s for r in runs for s in r.steps]), 1)]


def by_context(runs: list[Run]) -> list[dict]:
    """[{context, drafted, accepted}] per step (context: tokens before the step, prompt included)."""
    rows = []
    for r in runs:
        for (a, d), start in zip(r.steps, r.starts or []):
            rows.append({"request": r.name, "context": len(r.served.prompt) + start, "drafted": d, "accepted": a})
    return sorted(rows, key=lambda x: x["context"])


@check("acceptance_collapse", scope="run", order=20)
def collapsed(runs: list[Run]) -> list:
    window = next((r.rep.window for r in runs if r.rep is not None), None)
    return collapse(by_context(runs), window, max((r.served.spec or {}).get("num_spec_tokens", 0) for r in runs))


def collapse(rows: list[dict], window: int | None = None, k: int = 0) -> list:
    """The context position from which acceptance falls and stays fallen while the engine keeps drafting
    (analysis/changepoint.py, the recorder's rule), the drafter's window named with its arithmetic when it
    explains it; the old code `acceptance_cliff` kept as the evidence's alias."""
    cp = change_point([(x["context"], x["drafted"], x["accepted"]) for x in rows], MIN_STEPS, MIN_STEPS)
    if cp is None:
        return []
    cut, sums = cp["position"], window_arithmetic(cp["position"], window, k)
    named = f": the drafter's window (max_position_embeddings {window}) ends there, {sums}" if sums else ""
    return [finding("acceptance_collapse", f"acceptance collapses past context position {cut}{named}",
                    f"{cp['steps_before']} steps before it accepted {cp['rate_before']:.0%} of their drafts, "
                    f"{cp['steps_after']} steps from it {cp['rate_after']:.0%}; the engine kept drafting: "
                    f"{cp['drafts_wasted']} drafts wasted" + (f" (window - k - 1: the first step whose {k} drafts "
                                                              "need a position past it)" if sums else ""),
                    cause="the drafter is asked to draft past its own window (vllm #58080)" if sums else "the "
                    "drafter stops working past a context length: a window or position limit (vllm #52873), a "
                    "cache that stops updating", fix="use a drafter whose max_position_embeddings covers the "
                    "target's max_model_len, or cap the context the engine speculates over" + (
                        "" if sums else "; replay the drafter's folder to name its window"),
                    evidence={"position": cut, "window": window, "window_arithmetic": sums, "alias": "acceptance_cliff",
                              **{x: cp[x] for x in ("rate_before", "rate_after", "steps_after", "drafts_wasted")}})]


@check("replay_mismatch", scope="request", order=30)
def replay(run: Run) -> list:
    """A replayed drafter whose kind the engine's counts contradict; else each step whose accepted count the exact
    greedy rule would not give for the replayed drafts (decided only where the output covers the drafts)."""
    if run.rep is None:
        return []
    replay_name, out, off = run.rep.name, run.served.ids, []
    if run.misfit:             # the counts show another kind of drafter than the one replayed, or (totals) another
        spec = run.served.spec or {}
        dr, acc = spec.get("num_draft_tokens", 0), spec.get("num_accepted_draft_tokens", 0)
        return [finding("replay_mismatch", f"{run.name}: the replayed drafter ({replay_name}) does not fit this "
                        f"engine: its counts show {run.misfit}", (f"{len(run.steps)} steps drafting "
                        f"{sorted({d for _, d in run.steps})} token(s)" if run.steps else f"{dr} drafted, {acc} "
                        "accepted (its totals: no steps sent)") + f" for {len(out)} output tokens",
                        cause="the drafter replayed is not the one the server runs",
                        fix="replay the drafter the server declares (--speculative-config, llama-server's -md)",
                        evidence={"request": run.name, "counts_show": run.misfit, "steps": len(run.steps),
                                  "drafted": dr, "accepted": acc})]
    for i, ((a, d), start, drafts) in enumerate(zip(run.steps, run.starts or [], run.replayed)):
        want = 0
        while want < min(len(drafts), d) and start + want < len(out) and drafts[want] == out[start + want]:
            want += 1
        decided = want == min(len(drafts), d) or start + want < len(out)
        if decided and want != a:
            off.append({"step": i, "context": len(run.served.prompt) + start, "engine": a,
                        "replayed": want, "drafts": drafts})
    if not off:
        return []
    first, lost = off[0], sum(max(0, o["replayed"] - o["engine"]) for o in off)
    return [finding("replay_mismatch", f"{run.name}: {len(off)} step(s) accepted a count the exact greedy rule "
                    f"does not give for {replay_name}'s drafts ({lost} token(s) the declared drafter would have "
                    f"had accepted)", f"first: step {first['step']} (context {first['context']}) accepted "
                    f"{first['engine']} where {replay_name}'s drafts {first['drafts']} match the output for "
                    f"{first['replayed']}", cause="the engine ran another drafter than declared (or at other "
                    "positions), or its acceptance is not the exact greedy rule", fix="check the drafter the "
                    "server loaded (its log, --speculative-config) against the folder replayed; a drafter past "
                    "its window drafts dummy tokens",
                    evidence={"request": run.name, "steps": off[:20], "count": len(off), "tokens_lost": lost})]
