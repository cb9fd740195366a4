"""The source notes' regression checklist over a batch of one configuration.

Each item is {"name", "passed": True | False | None (reported only), "value", "target"}.
Thresholds come from seed 000 (stops by id, no template leakage, accepted span, acceptance rate)
and seed 001 (length bands, punctuation density 10-25% with > 40% a flood, repeats)."""
from __future__ import annotations

from collections import Counter
from statistics import mean, median

from specdec_core.analysis.textmetrics import repeated_clauses
from specdec_core.audio.conditions import LENGTH_BANDS

MIN_MEDIAN_SPAN = 3.0          # tokens per cloud call; below it speculation barely pays
BAND_SHARE = 0.8               # share of clips whose hanzi count must be in the band
PUNCT_RANGE = (0.10, 0.25)     # median punctuation density
PUNCT_FLOOD = 0.40             # a clip above this is abnormal (seed 001)
MAX_MEDIAN_REPEAT = 0.10       # median repeat_rate (repeated CJK 2/3-grams)
MAX_MEAN_ADJACENT = 0.20       # mean adjacent repeats per clip ("慢慢" is fine once in a while)
MIN_ACCEPTANCE = 0.60
CLEAN_ENDS = ("eos", "sentence")


def _item(name, passed, value, target) -> dict:
    return {"name": name, "passed": passed, "value": value, "target": target}


def metric_values(rows, key) -> list:
    """The rows' numeric values of metric `key` (missing, None and booleans left out)."""
    return [v for r in rows for v in [(r.get("metrics") or {}).get(key)]
            if isinstance(v, (int, float)) and not isinstance(v, bool)]


def premature_stop(metrics: dict, min_new_tokens: int) -> bool:
    """A clip that did not end cleanly: a stop from a fault (string match) or a cycle, no stop
    before max_new_tokens, or a stop before min_new_tokens that was not the model's own EOS or
    sentence end."""
    ended = metrics.get("ended_by") or ""
    if ended in ("fault", "cycle", "max_tokens"):
        return True
    return ended not in CLEAN_ENDS and (metrics.get("new_tokens") or 0) < min_new_tokens


def checklist(rows: list[dict], min_new_tokens: int = 16, prompt_type: str = "detailed") -> list[dict]:
    """Items over the ok rows of ONE configuration (rows as batch rows: "ok", "metrics",
    "prompt_type"). `prompt_type` is the band for rows that do not name their own."""
    ok = [r for r in rows if r.get("ok")]
    items = [_item("clips decoded", None, f"{len(ok)} of {len(rows)}", "failed clips are listed in the table")]
    if not ok:   # every item with its target, graded on nothing
        blank = {"metrics": dict.fromkeys(("punct_density", "repeat_rate", "adjacent_repeats"), 0)}
        return items + [dict(it, passed=None, value="no decoded clips")
                        for it in checklist([{**blank, "ok": True}], min_new_tokens, prompt_type)[1:]]
    metrics = [r.get("metrics") or {} for r in ok]
    items += _stop_items(metrics, min_new_tokens) + [_span_item(ok), _band_item(ok, metrics, prompt_type)]
    return items + _text_items(ok) + _acceptance_items(ok)


def checklist_head(items: list[dict]) -> str:
    """'6 of 6 checks passed, 4 reported only (not graded)': the count heads every line under it
    (the CLI's report and the page's checklist say the same)."""
    graded = [it for it in items if it.get("passed") is not None]
    head = f"{sum(bool(it['passed']) for it in graded)} of {len(graded)} checks passed"
    return head + (f", {len(items) - len(graded)} reported only (not graded)" if len(items) > len(graded) else "")


def _stop_items(metrics: list, min_new_tokens: int) -> list:
    n = len(metrics)
    bad = [m.get("ended_by") or "?" for m in metrics if premature_stop(m, min_new_tokens)]
    detail = ", ".join(f"{k} {v}" for k, v in Counter(bad).most_common())
    leaks = sum(bool(m.get("template_leak")) for m in metrics)
    return [_item("no premature stops", not bad, f"{len(bad)} of {n} clips" + (f" ({detail})" if bad else ""),
                  f"all end by EOS or first sentence (>= {min_new_tokens} tokens); "
                  "none by fault, cycle or max new tokens"),
            _item("no template leakage", leaks == 0, f"{leaks} of {n} clips", "0 clips")]


def _span_item(ok: list) -> dict:
    spans = metric_values(ok, "mean_accepted_length")
    if not spans:
        return _item("median accepted span", None, "no cloud calls", f">= {MIN_MEDIAN_SPAN:g} tokens per cloud call")
    med = median(spans)
    return _item("median accepted span", med >= MIN_MEDIAN_SPAN, f"{med:.2f} tokens",
                 f">= {MIN_MEDIAN_SPAN:g} tokens per cloud call")


def _band_item(ok: list, metrics: list, prompt_type: str) -> dict:
    n, in_band, parts = len(ok), 0, Counter()
    for r, m in zip(ok, metrics):
        pt = r.get("prompt_type") or prompt_type
        lo, hi = LENGTH_BANDS.get(pt, LENGTH_BANDS["detailed"])
        parts[pt] += 1
        in_band += lo <= (m.get("hanzi_count") or 0) <= hi
    bands = ", ".join(f"{pt} {LENGTH_BANDS[pt][0]}-{LENGTH_BANDS[pt][1]}" for pt in LENGTH_BANDS if pt in parts)
    return _item("length within band", in_band / n >= BAND_SHARE, f"{in_band} of {n} clips ({in_band / n:.1%})",
                 f">= {BAND_SHARE:.0%} of clips in band ({bands} 汉字)")


def _text_items(ok: list) -> list:
    dens = metric_values(ok, "punct_density")
    med_d, floods = median(dens), sum(d > PUNCT_FLOOD for d in dens)
    rep, adj = median(metric_values(ok, "repeat_rate")), mean(metric_values(ok, "adjacent_repeats"))
    loops = sum(bool((r.get("metrics") or {}).get("cycles")) for r in ok)   # a median hides them
    said = sum(bool(repeated_clauses(r.get("text"))) for r in ok)             # and these
    return [_item("punctuation density", PUNCT_RANGE[0] <= med_d <= PUNCT_RANGE[1] and floods == 0,
                  f"median {med_d:.1%}, {floods} clips > {PUNCT_FLOOD:.0%}",
                  f"median {PUNCT_RANGE[0]:.0%}-{PUNCT_RANGE[1]:.0%}, no clip > {PUNCT_FLOOD:.0%}"),
            _item("repeat rate low", rep <= MAX_MEDIAN_REPEAT and not loops and not said,
                  f"median {rep:.1%}, {loops} of {len(ok)} clips loop, {said} say a clause twice",
                  f"median <= {MAX_MEDIAN_REPEAT:.0%} (repeated CJK 2/3-grams), no clip in a cycle "
                  "or saying a clause twice"),
            _item("adjacent repeats near zero", adj <= MAX_MEAN_ADJACENT, f"mean {adj:.2f} per clip",
                  f"mean <= {MAX_MEAN_ADJACENT:g} per clip")]


def _tree_item(ok: list) -> dict:
    """Trees verify siblings of which at most one per depth can be accepted, so accepted / drafted
    is not the chain's rate: a tree is held to the same tokens per cloud call that the chain's
    target asks for, 1 + MIN_ACCEPTANCE x k (the mean acceptance length, as vLLM / SGLang read trees)."""
    mal = metric_values(ok, "mean_accepted_length")
    ks = [((r.get("trace") or {}).get("config") or {}).get("k") for r in ok]
    k = max((x for x in ks if isinstance(x, int)), default=4)
    want = 1 + MIN_ACCEPTANCE * k
    name = "acceptance (trees: mean acceptance length)"
    if not mal:
        return _item(name, None, "no cloud calls", f"> {want:.2f} tokens per cloud call")
    return _item(name, mean(mal) > want, f"mean {mean(mal):.2f} tokens per cloud call",
                 f"> {want:.2f} (1 + {MIN_ACCEPTANCE:.0%} × k {k}: the chain's target per cloud call)")


def _acceptance_items(ok: list) -> list:
    acc = metric_values(ok, "acceptance_rate")
    rate, calls = metric_values(ok, "cloud_call_rate"), metric_values(ok, "cloud_calls")
    if metric_values(ok, "nodes_per_call"):
        first = _tree_item(ok)
    elif acc:
        first = _item("acceptance rate", mean(acc) > MIN_ACCEPTANCE, f"mean {mean(acc):.1%}",
                      f"> {MIN_ACCEPTANCE:.0%} (accepted / drafted, verified rounds; chains)")
    else:
        first = _item("acceptance rate", None, "no cloud calls", f"> {MIN_ACCEPTANCE:.0%}")
    return [first, _item("cloud call rate", None,
                         f"mean {mean(rate):.1%} of rounds, {mean(calls):.1f} calls per clip" if rate else "n/a",
                         "reported (lower = fewer cloud calls)")]
