"""Checks on a finished trace's text and declared knobs (cycles, stops, text measures, the entropy
gate), each returning [] or its one finding: registered by recorder/checks/text/trace.py."""
from __future__ import annotations

import math
import re

from specdec_core.analysis.audio_dependence import check_edge_mishears
from specdec_core.analysis.metrics import threshold_nats
from specdec_core.audio.conditions import LENGTH_BANDS
from specdec_core.findings import finding

# spans of 1-8 hanzi/punctuation written twice in a row ('音色音色', '，，'): the 'HelloHello'
# symptom. Chinese reduplication ('慢慢') makes one or two normal, so `doubling` needs several.
_DOUBLED = re.compile(r"([\u4e00-\u9fff，。、：；！？]{1,8}?)\1")


def cycles(trace) -> list:
    return [finding("cycle", f"cycle of period {c['period']} at tokens {c['start']}-{c['end'] - 1} "
                    f"({c['text']!r})", "the same short pattern repeats in the committed text",
                    "greedy draft loop (seed 003): a deterministic edge revisits the same state",
                    "cycle_action=resample or stop; ban_adjacent_repeat / no_repeat_ngram=3; verify more often")
            for c in trace.cycles[:1]]


def length(trace) -> list:
    m, cfg = trace.metrics, trace.config
    band, hanzi = LENGTH_BANDS.get(cfg.get("prompt_type", ""), None), m.get("hanzi_count", 0)
    if not band or trace.ended_by not in ("sentence", "eos") or band[0] <= hanzi <= band[1]:
        return []
    return [finding("length", f"{hanzi} 汉字, outside the {cfg.get('prompt_type')} band "
                    f"{band[0]}-{band[1]}", "the description is too short or too long for its prompt type",
                    "prompt type or stop rule mismatch", "check prompt_type and min_new_tokens")]


def no_stop(trace) -> list:
    if trace.ended_by != "max_tokens":
        return []
    return [finding("no_stop", f"no stop before max_new_tokens ({trace.metrics.get('new_tokens', 0)} tokens)",
                    "the decoder never saw an end-of-sequence or sentence-final token it stops on",
                    "stop ids not recognised (e.g. searching for <|im_end|> in skip_special_tokens text)",
                    "stop by id: pass every EOS id (<|im_end|>, <|endoftext|>)")]


def template_leak(trace) -> list:
    m = trace.metrics
    if not m.get("template_leak"):
        return []
    return [finding("template_leak", "chat template leaked into the output",
                    f"markers found: {', '.join(m.get('leak_markers', [])) or 'yes'}",
                    "the decoder ran past <|im_end|> into the next turn",
                    "stop on the <|im_end|> id, never on decoded text")]


def punct_flood(trace) -> list:
    pd = trace.metrics.get("punct_density") or 0.0
    if pd <= 0.4:
        return []
    return [finding("punct_flood", f"punctuation flood: {pd:.0%} of characters",
                    "more than 40% punctuation (target 10-25%)",
                    "over-sharp draft distribution or position errors make punctuation win (seed 001)",
                    "temperature once; no 1x1 mask; comma_gate=4, period_gate=8")]


def doubling(trace) -> list:
    dbl = [m.group(1) for m in _DOUBLED.finditer(trace.text)]
    if len(dbl) < 3:
        return []
    return [finding("doubling", f"{len(dbl)} doubled spans ('{dbl[0]}{dbl[0]}' ...)",
                    "phrases written twice in a row, like 'HelloHello'",
                    "tokens appended to the input twice (input corruption, seed 004) or a stale cache",
                    "keep one committed sequence; never append drafts to the shared input")]


def entropy_gate(trace) -> list:
    """always_verify / never_verify: what a declared entropy threshold did."""
    thr, m = threshold_nats(trace), trace.metrics
    if thr is None or m.get("rounds", 0) < 3 or 0 < m.get("cloud_call_rate", 0) < 1.0:
        return []
    V = (trace.info or {}).get("vocab_size")     # the threshold in nats and as a share of ln|V|
    said = f"{thr:.2f} nats" + ("" if math.isinf(thr) or not V or V < 2 else
                                f" ({thr / math.log(V):.2f}·ln|V|, |V| = {V})")
    if m.get("cloud_call_rate", 0) >= 1.0:
        return [finding("always_verify", "the cloud was called on every block",
                        f"entropy threshold {said} never let a block through",
                        "threshold below the edge's typical entropy", "raise entropy_threshold or use classic SD")]
    return [finding("never_verify", "the cloud was never called",
                    f"entropy threshold {said} is above every draft entropy", "the output is the edge model alone",
                    "lower entropy_threshold (entropy_unit=frac gives it as a share of ln|V|, the same on any vocabulary)")]


TRACE_CHECKS = [cycles, template_leak, punct_flood, doubling, entropy_gate, check_edge_mishears]
# checks against a declared task (the prompt type's length band, its stop and its acceptance
# expectations): they run where the run declares its prompt_type (the built-in decoder does)
TASK_CHECKS = [length, no_stop]     # acceptance_collapse: recorder/checks/speed/collapse.py
