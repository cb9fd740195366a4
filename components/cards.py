"""Metric cards and live warnings as HTML (inject CARDS_CSS once; the findings: components/findings.py)."""

from __future__ import annotations

from specdec_core.analysis.glossary import hover, term
from specdec_core.audio.conditions import LENGTH_BANDS
from specdec_core.evaluation.batch.checklist import PUNCT_RANGE
from specdec_core.findings import from_json

from .formatting import DASH, esc, fault_label, fmt, is_number, num, pct, stylesheet

CARDS_CSS = stylesheet("cards")


def _status(value, good, bad=None) -> str:
    """'good' | 'warn' | 'bad' | '' given predicates on a number."""
    if not is_number(value):
        return ""
    if bad is not None and bad(value):
        return "bad"
    return "good" if good(value) else "warn"


def _card(label: str, value: str, sub: str = "", status: str = "", help_text: str = "") -> str:
    cls = "ss-card" + (f" ss-card-{status}" if status else "")
    sub_html = f'<div class="ss-card-sub">{esc(sub)}</div>' if sub else ""
    return (
        f'<div class="{cls}" title="{esc(help_text)}" data-status="{esc(status)}">'
        f'<div class="ss-card-label">{esc(label)}</div><div class="ss-card-value">{esc(value)}</div>'
        f"{sub_html}</div>"
    )


LOSSY_CODES = ("lossless_violation", "lossy_accept", "rank_window_exceeded")


def lossy_findings(findings: list[dict] | None) -> list[dict]:
    """Findings saying the run accepted drafts off the cloud's choice (its acceptance measures leniency)."""
    return [f for f in findings or [] if from_json(f)["code"] in LOSSY_CODES]


def _tcard(key: str, shown: str, sub: str = "", status: str = "") -> str:
    """A card labelled and explained (on hover) by the glossary, its value as shown (fmt: with its unit)."""
    return _card(term(key).label, shown, sub, status, hover(key))


TREE_RATE_NOTE = ("a tree verifies siblings of which at most one per depth can be accepted, so this share "
                  "is not comparable with a chain's; judge a tree by its mean acceptance length")


def is_tree(metrics: dict | None) -> bool:
    """A run that drafted token trees (its metrics have nodes verified per call)."""
    return is_number((metrics or {}).get("nodes_per_call"))


def acceptance_cards(m: dict, lossy: list) -> list[str]:
    """The acceptance headline: chains, the rate against its target then the mean acceptance length;
    trees (as vLLM / SGLang / EAGLE read them), the mean acceptance length, nodes accepted, nodes per call."""
    acc, mal = m.get("acceptance_rate"), m.get("mean_accepted_length")
    mal_card = _tcard("mean_accepted_length", num(mal, 2), "tokens per cloud call", _status(mal, lambda v: v >= 3))
    if lossy and is_number(acc):
        acc_card = _card(term("acceptance_rate").label, pct(acc), "lossy: drafts accepted off the cloud's choice",
                         "warn", hover("acceptance_rate") + ". This run accepted drafts the cloud would not "
                         "have chosen, so a high rate here measures leniency, not agreement.")
    elif is_tree(m):
        acc_card = _card("nodes accepted / verified", pct(acc), "per node verified; no chain target",
                         "", f"{hover('acceptance_rate')}. For a tree: {TREE_RATE_NOTE}.")
        return [mal_card, acc_card, _tcard("nodes_per_call", num(m.get("nodes_per_call"), 1),
                                           "draft nodes per cloud call")]
    else:
        acc_card = _tcard("acceptance_rate", fmt("acceptance_rate", acc), "target > 60% (chains)",
                          _status(acc, lambda v: v > 0.6, lambda v: v < 0.3))
    return [acc_card, mal_card]


def metric_cards(metrics: dict | None, prompt_type: str | None = None,
                 findings: list[dict] | None = None, speedup: dict | None = None) -> str:
    """Headline metrics as cards, tinted against the checklist targets (a lossy run's acceptance never good)."""
    m = metrics or {}
    if not m:
        return '<div class="ss-none">No metrics yet.</div>'
    calls, rate, punct, hanzi, ended = (m.get(k) for k in ("cloud_calls", "cloud_call_rate", "punct_density",
                                                           "hanzi_count", "ended_by"))
    band = LENGTH_BANDS.get(prompt_type or "")   # the checklist's bands: they tint, not judge
    hanzi_status = _status(hanzi, lambda v: band[0] <= v <= band[1]) if band else ""
    cards = [
        *acceptance_cards(m, lossy_findings(findings)),
        _tcard("cloud_calls", num(calls), f"{pct(rate, 0)} of rounds" if is_number(rate) else ""),
        _tcard("corrections", num(m.get("corrections")), "cloud replaced a draft"),
        _tcard("tokens_per_s", num(m.get("tokens_per_s"), 1),
               f"tokens/s · {num(m.get('wall_s'), 2)} s wall time, page drawing included"
               if is_number(m.get("wall_s")) else "tokens/s"),
        _tcard("punct_density", fmt("punct_density", punct), "target 10–25%",
               _status(punct, lambda v: PUNCT_RANGE[0] <= v <= PUNCT_RANGE[1], lambda v: v > 0.40)),
        _tcard("hanzi_count", num(hanzi), f"band {band[0]}–{band[1]}" if band else "CJK characters", hanzi_status),
        _tcard("ended_by", fmt("ended_by", ended), "", ENDED_STATUS.get(ended, "warn")),
    ]
    share, thr = m.get("share_above_threshold"), m.get("entropy_threshold_nats")
    if is_number(share):   # only runs with an entropy threshold have it
        cards.insert(3, _card("above threshold", pct(share, 0),
                              f"of drafted tokens > {thr:.2f} nats" if is_number(thr) else "of drafted tokens",
                              help_text="share of all drafted tokens (rejected ones included) whose draft "
                                        "entropy exceeds the entropy threshold, resolved to nats"))
    if speedup and is_number(speedup.get("speedup")):
        cards.insert(0, speed_card(speedup))
    return '<div class="ss-cards">' + "".join(cards) + "</div>"


def speed_kind(sp: dict) -> str:
    """What a speed-up over cloud-only may claim, in order: busy, cloud_off, lossy, above_bound, none
    (spread covers 1.0), faster or slower; the card, the A/B cell and the verdict's colour read it (issue 58)."""
    if sp.get("verdict") == "busy":
        return "busy"
    for kind in ("cloud_off", "lossy", "above_bound"):
        if sp.get(kind):
            return kind
    if sp.get("verdict") == "no measurable difference":
        return "none"
    return "faster" if sp.get("verdict") == "faster" else "slower"


def speed_times(sp: dict) -> str:
    """Which time is which: decoding (median of quiet repeats) vs cloud-only (interleaved with them)."""
    n = sp.get("repeats", 1)
    return (f"decoding {sp['decode_s']:.2f} s (median of {n} quiet repeats, no page drawing) vs "
            f"cloud-only {sp['cloud_only_s']:.2f} s (median of {n}, interleaved with them)")


def speed_card(sp: dict) -> str:
    """The speed-up card as speed_kind reads it: a number only for a measured speed-up of the same output."""
    kind, rng = speed_kind(sp), f"{sp['lo']:.2f}–{sp['hi']:.2f}×"
    tip = f"{hover('speedup')}; spread {rng}; {speed_times(sp)}"
    label = "speed of a different output" if kind == "lossy" else term("speedup").label
    if kind == "busy":
        return _card(label, DASH, "machine busy: not timed (see the status line)", "", tip)
    if kind == "cloud_off":
        return _card(label, DASH, "cloud-only time off (the other side is above its bound): not shown", "warn", tip)
    if kind == "above_bound":
        return _card(label, DASH, f"above the {sp['bound']:.2f}× this acceptance allows: timing off, not shown",
                     "warn", tip)
    if kind == "none":
        return _card(label, "no difference", f"spread {rng} covers 1.00×", "", tip)
    sub = ("output differs from cloud-only: not a speed-up" if kind == "lossy" else
           f"{rng} · {sp['decode_s']:.2f} s vs {sp['cloud_only_s']:.2f} s (medians)")
    return _card(label, f"{sp['speedup']:.2f}×", sub, "good" if kind == "faster" else "warn", tip)


# why a run ended -> its card's tint (any other reason: warn)
ENDED_STATUS = {"eos": "good", "sentence": "good", "cycle": "bad", "fault": "bad", None: "", "": ""}


SHOWN_WARNINGS = 5


def warnings_html(warnings: list[dict] | None) -> str:
    """Live warnings as they arrive, newest last; nothing when there are none (no "no warnings" above an error)."""
    if not warnings:
        return '<div class="ss-warnings-empty" data-count="0"></div>'
    def li(w):
        return (f'<li class="ss-warning" data-kind="{esc(w.get("kind"))}">'
                f'<span class="ss-warning-kind">{esc(fault_label(w.get("kind") or "warning"))}</span>'
                f'{esc(w.get("message"))}</li>')

    # whole lines only: the first few shown, the rest folded (never a scroll box cutting a line)
    items = "".join(li(w) for w in warnings[:SHOWN_WARNINGS])
    rest = warnings[SHOWN_WARNINGS:]
    if rest:
        items += (f'<li class="ss-warning-more"><details><summary>{len(rest)} more</summary>'
                  f'<ul class="ss-warnings">{"".join(li(w) for w in rest)}</ul></details></li>')
    n = len(warnings)
    head = (f'<div class="ss-warnings-head">{n} warning{"s" if n != 1 else ""} while decoding '
            '(the findings under Diagnostics say what they mean)</div>')
    return f'<div class="ss-warnings-box" data-count="{n}">{head}<ul class="ss-warnings">{items}</ul></div>'
