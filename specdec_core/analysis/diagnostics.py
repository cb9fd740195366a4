"""Plain-language findings from a finished trace: what is wrong, the likely cause, the fix."""
from __future__ import annotations

import math
import re

from specdec_core.analysis.acceptance import rank_findings
from specdec_core.analysis.audio_dependence import check_edge_mishears
from specdec_core.analysis.metrics import threshold_nats
from specdec_core.audio.conditions import LENGTH_BANDS
from specdec_core.findings import finding

_DOUBLED = re.compile(r"([\u4e00-\u9fff，。、：；！？]{1,8}?)\1")


def doubled_spans(text: str) -> list[str]:
    """Spans of 1-8 hanzi/punctuation written twice in a row ('音色音色', '，，'): the
    'HelloHello' symptom. Chinese reduplication ('慢慢') makes one or two normal, so the
    finding needs several."""
    return [m.group(1) for m in _DOUBLED.finditer(text)]


def diagnose(trace) -> list[dict]:
    """Findings ({severity, key, title, detail, cause, fix}) from what the run did.

    Severities: error = a bug (the decoder did something the knobs do not allow: a cycle, a
    cache desync, a hidden draft processor, a premature stop, or a draft accepted that the
    declared rule forbids); warning = allowed but probably not what the user wants; info = the
    cost of a choice the user made (e.g. `lossy_accept`: verify=rank with rank_threshold > 1 did
    accept drafts the cloud ranked 2nd or lower, and by how much the text left the cloud's).
    `trace.config` holds the knobs as the user set them, so a run whose code accepts by rank
    while greedy was declared (the `lenient_rank` fault) is an error, `lossless_violation`, the
    recorder's code for the same thing (analysis/acceptance.py)."""
    m, cfg, out = trace.metrics, trace.config, []
    # Enabled faults are a config badge in the views, never a finding: every finding here is
    # computed from what the run did.
    for c in trace.cycles:
        out.append(finding("cycle", f"cycle of period {c['period']} at tokens {c['start']}-{c['end'] - 1} "
                      f"({c['text']!r})", "the same short pattern repeats in the committed text",
                      "greedy draft loop (seed 003): a deterministic edge revisits the same state",
                      "cycle_action=resample or stop; ban_adjacent_repeat / no_repeat_ngram=3; verify more often"))

    ended, n = trace.ended_by, m.get("new_tokens", 0)
    band = LENGTH_BANDS.get(cfg.get("prompt_type", ""), None)
    hanzi = m.get("hanzi_count", 0)
    last = trace.tokens[-1] if trace.tokens else None
    unverified_end = (cfg.get("entropy_threshold") is None and last is not None
                      and last.source == "draft" and ended not in ("cancelled",))
    if ended not in ("eos", "sentence", "max_tokens", "cycle", "cancelled") or unverified_end:
        out.append(finding("premature_stop", f"premature stop after {n} tokens ({hanzi} 汉字)",
                      f"ended_by={ended}; the last tokens are unverified drafts" if unverified_end
                      else f"ended_by={ended}",
                      "a stop fired on decoded text (a string match on the draft), before the cloud "
                      "verified the block and regardless of min_new_tokens",
                      "stop on token ids only (EOS list, first sentence after min_new_tokens)"))
    elif band and ended in ("sentence", "eos") and not band[0] <= hanzi <= band[1]:
        out.append(finding("length", f"{hanzi} 汉字, outside the {cfg.get('prompt_type')} band "
                      f"{band[0]}-{band[1]}", "the description is too short or too long for its prompt type",
                      "prompt type or stop rule mismatch", "check prompt_type and min_new_tokens"))
    if ended == "max_tokens":
        out.append(finding("no_stop", f"no stop before max_new_tokens ({n} tokens)",
                      "the decoder never saw an end-of-sequence or sentence-final token it stops on",
                      "stop ids not recognised (e.g. searching for <|im_end|> in skip_special_tokens text)",
                      "stop by id: pass every EOS id (<|im_end|>, <|endoftext|>)"))

    if m.get("template_leak"):
        out.append(finding("template_leak", "chat template leaked into the output",
                      f"markers found: {', '.join(m.get('leak_markers', [])) or 'yes'}",
                      "the decoder ran past <|im_end|> into the next turn",
                      "stop on the <|im_end|> id, never on decoded text"))

    pd = m.get("punct_density") or 0.0
    if pd > 0.4:
        out.append(finding("punct_flood", f"punctuation flood: {pd:.0%} of characters",
                      "more than 40% punctuation (target 10-25%)",
                      "over-sharp draft distribution or position errors make punctuation win (seed 001)",
                      "temperature once; no 1x1 mask; comma_gate=4, period_gate=8"))

    dbl = doubled_spans(trace.text)
    if len(dbl) >= 3:
        out.append(finding("doubling", f"{len(dbl)} doubled spans ('{dbl[0]}{dbl[0]}' ...)",
                      "phrases written twice in a row, like 'HelloHello'",
                      "tokens appended to the input twice (input corruption, seed 004) or a cache desync",
                      "keep one committed sequence; never append drafts to the shared input"))

    acc = m.get("acceptance_rate")
    if acc is not None and m.get("cloud_calls", 0) >= 3 and acc < 0.3:
        out.append(finding("acceptance_collapse", f"acceptance collapse: {acc:.0%} of drafted tokens accepted",
                      f"{m['cloud_calls']} cloud calls, mean accepted length {m.get('mean_accepted_length')}",
                      "the edge drafts from a wrong context or a distorted distribution",
                      "check cache resync, positions and draft-side penalties; lower k"))

    # Accepted drafts the cloud ranked 2nd or lower, judged against the acceptance rule the
    # trace's config declares (the knobs as the user set them): lossless_violation (error) under
    # a lossless declaration, rank_window_exceeded (error) past a declared rank window,
    # lossy_accept (info; warning past the cloud's top-5) inside a window the user chose. The
    # rule and its severities are shared with the recorder: analysis/acceptance.py.
    out += rank_findings(trace.tokens, cfg, trace.prompt_len)

    thr = threshold_nats(trace)
    if thr is not None and m.get("rounds", 0) >= 3:
        rate = m.get("cloud_call_rate", 0)
        said = threshold_words(thr, (trace.info or {}).get("vocab_size"))
        if rate >= 1.0:
            out.append(finding("always_verify", "the cloud was called on every block",
                          f"entropy threshold {said} never let a block through",
                          "threshold below the edge's typical entropy", "raise entropy_threshold or use classic SD"))
        elif rate == 0:
            out.append(finding("never_verify", "the cloud was never called",
                          f"entropy threshold {said} is above every draft entropy",
                          "the output is the edge model alone",
                          "lower entropy_threshold (entropy_unit=frac gives it as a share of ln|V|, "
                          "the same on any vocabulary)"))
    out += check_edge_mishears(trace)
    return out


def threshold_words(nats: float, vocab_size=None) -> str:
    """"3.20 nats (0.48·ln|V|, |V| = 772)": a resolved threshold in both forms."""
    if math.isinf(nats) or not vocab_size or vocab_size < 2:
        return f"{nats:.2f} nats"
    return f"{nats:.2f} nats ({nats / math.log(vocab_size):.2f}·ln|V|, |V| = {vocab_size})"
