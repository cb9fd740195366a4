"""A/B comparison: metric diff table with a "better" column, and a character-level text diff."""

from __future__ import annotations

import difflib
import math

import pandas as pd

from specdec_core.analysis.glossary import hover, term
from specdec_core.audio.conditions import LENGTH_BANDS
from specdec_core.evaluation.batch.checklist import PUNCT_RANGE
from specdec_core.evaluation.bench.speedup import REPEATS, speedup_words
from specdec_core.evaluation.bench.stats import spread

from .cards import speed_kind, speed_times
from .formatting import esc, fmt, is_number, stylesheet

# Metrics not listed have no direction (hanzi_count should sit inside its prompt type's band).
HIGHER = ("acceptance_rate", "mean_accepted_length", "tokens_per_s", "chrf", "emotion_hit", "speedup")
LOWER = ("nodes_per_call", "punct_density", "repeat_rate", "adjacent_repeats", "cloud_calls", "cloud_call_rate",
         "target_forwards", "corrections", "wall_s", "cycles", "template_leak", "cache_desyncs", "rejected_tokens",
         "draft_forwards", "decode_s", "bytes_up", "bytes_down")
DIRECTION = {**dict.fromkeys(HIGHER, +1), **dict.fromkeys(LOWER, -1)}

DIFF_CSS = stylesheet("compare")


# A and B side by side on one grid: the n-th block of A's column and of B's share a grid row, so
# a warning box or a longer token view on one side pushes both sides' cards down alike.
AB_SIDES_ROWS = 12
AB_SIDES_CSS = ("#ab-sides { display: grid !important; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr);"
                " column-gap: 16px; row-gap: 8px; align-items: start; }\n"
                "#ab-side-a, #ab-side-b { display: contents !important; }\n"
                "#ab-side-a > * { grid-column: 1; } #ab-side-b > * { grid-column: 2; }\n"
                + "".join(f"#ab-side-a > :nth-child({i}), #ab-side-b > :nth-child({i}) {{ grid-row: {i}; }}\n"
                          for i in range(1, AB_SIDES_ROWS + 1))
                + "@media (max-width: 720px) { #ab-sides { display: flex !important; flex-direction: column; }"
                  " #ab-side-a, #ab-side-b { display: flex !important; flex-direction: column; } }\n")
DIFF_CSS += AB_SIDES_CSS


def _scalar(value):
    """Comparable form of a metric value: lists count their items, bools become 0/1."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (list, tuple)):
        if value and all(is_number(v) for v in value):  # per-position rates: show, don't compare
            return " / ".join(f"{v:.2f}" for v in value)
        return len(value)
    if isinstance(value, dict):
        return None
    return value


# Cost and agreement metrics: better only at the same text (a lossy side is cheaper, not better).
COST = {"decode_s", "acceptance_rate", "mean_accepted_length", "nodes_per_call", "cloud_calls", "cloud_call_rate", "target_forwards",
        "draft_forwards", "corrections", "rejected_tokens", "tokens_per_s", "wall_s", "bytes_up",
        "bytes_down", "speedup"}
# Timings move between repeats of one run: judged against their spread (noise_verdict; identical
# configurations then name a winner in ~1.5% of rows, by simulation with 3 repeats), or without
# repeats, "within noise" under NOISE_REL of the larger value.
TIMED = {"decode_s", "wall_s", "tokens_per_s", "speedup", "cloud_only_s"}
NOISE_FACTOR = 1.5
NOISE_REL = 0.20
WITHIN_NOISE = f"within noise: timed once per side, and a timing difference under {NOISE_REL:.0%} is not called better"
IDENTICAL = "A and B have identical configurations: any difference is noise, none is called better"
# Metrics with a target band: inside it on both sides is a tie, not a win for the smaller number.
BANDS = {"punct_density": PUNCT_RANGE}
# Per-draft counts a tree and a chain count differently (TREE_NOTE): no winner with a tree on a side.
TREE_INCOMPARABLE = {"acceptance_rate", "rejected_tokens", "draft_forwards", "corrections"}
TREE_NOTE = ("not comparable with a tree on a side: a tree verifies siblings of which at most one per "
             "depth can be accepted; compare the mean acceptance length (tokens per cloud call)")
NOT_COMPARED = "texts differ: fewer cloud calls or a higher acceptance only counts at the same output"


SAME = "the same value on both sides"


def _band_verdict(key: str, a, b, band) -> tuple[str, str]:
    lo, hi = band
    ina, inb = lo <= a <= hi, lo <= b <= hi
    target = f"target {lo:g}–{hi:g}" if key == "hanzi_count" else f"target {lo:.0%}–{hi:.0%}"
    if ina and inb:
        return "=", f"both inside the {target}"
    if ina != inb:
        return ("A" if ina else "B"), f"only {'A' if ina else 'B'} is inside the {target}"
    da, db = min(abs(a - lo), abs(a - hi)), min(abs(b - lo), abs(b - hi))
    if math.isclose(da, db):
        return "=", f"both equally outside the {target}"
    return ("A" if da < db else "B"), f"both outside the {target}; {'A' if da < db else 'B'} is closer"


def noise_verdict(key: str, samples_a: list, samples_b: list) -> tuple[str, str]:
    """A timing judged on repeats: better only beyond NOISE_FACTOR x the larger spread."""
    (ma, (lo_a, hi_a)), (mb, (lo_b, hi_b)) = spread(samples_a, None), spread(samples_b, None)
    noise = max(hi_a - lo_a, hi_b - lo_b)
    seen = (f"A {fmt(key, lo_a)}–{fmt(key, hi_a)}, B {fmt(key, lo_b)}–{fmt(key, hi_b)}"
            f" over {len(samples_a)} and {len(samples_b)} repeats; medians "
            f"differ by {fmt(key, abs(mb - ma))}, noise {fmt(key, noise)} (the larger spread)")
    if abs(mb - ma) <= NOISE_FACTOR * noise:
        return "=", f"within noise: {seen}, not more than {NOISE_FACTOR:g}× the noise"
    win = "B" if (mb - ma) * DIRECTION[key] > 0 else "A"
    return win, f"{'higher' if DIRECTION[key] > 0 else 'lower'} is better, beyond the noise: {seen}"


def judge(key: str, a, b, same_text: bool | None = None, prompt_type: str | None = None,
          samples: tuple[list, list] | None = None, tree: bool = False) -> tuple[str, str]:
    """(winner, why): "A" | "B" | "=" | "" (no direction or not comparable); same_text None: unknown;
    `samples`: a timing's repeats per side, judged against their spread."""
    band = LENGTH_BANDS.get(prompt_type or "") if key == "hanzi_count" else BANDS.get(key)
    if band and is_number(a) and is_number(b):
        return _band_verdict(key, a, b, band)
    direction = DIRECTION.get(key)
    if direction is None or not (is_number(a) and is_number(b)):
        return "", ""
    if key in COST and same_text is False:
        return "", NOT_COMPARED
    if tree and key in TREE_INCOMPARABLE:
        return "", TREE_NOTE
    if key in TIMED and samples and len(samples[0]) > 1 and len(samples[1]) > 1:
        return noise_verdict(key, *samples)
    if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12):
        return "=", SAME
    if key in TIMED and abs(b - a) <= NOISE_REL * max(abs(a), abs(b)):
        return "=", WITHIN_NOISE
    win = "B" if (b - a) * direction > 0 else "A"
    return win, ("higher is better" if direction > 0 else "lower is better") + (
        " (same text on both sides)" if key in COST and same_text else "")


def _keys(a_all: dict, b_all: dict) -> list[str]:
    """The table's order (GROUPS, the drafting headline first), then the rest alphabetically."""
    order = [k for _, _, ks in sorted(GROUPS, key=lambda g: g[0] != "draft") for k in ks]
    keys = [k for k in order if k in a_all or k in b_all]
    keys += sorted(k for k in set(a_all) | set(b_all) if k not in order)
    return [k for k in keys if not isinstance(a_all.get(k), dict) and not isinstance(b_all.get(k), dict)]


def metric_diff_table(metrics_a: dict | None, metrics_b: dict | None, same_text: bool | None = None,
                      prompt_type: str | None = None) -> pd.DataFrame:
    """One row per metric: A, B, delta (B - A) and the better side (metric_diff_html's data, for scripts)."""
    a_all, b_all = metrics_a or {}, metrics_b or {}
    rows = []
    for key in _keys(a_all, b_all):
        a, b = _scalar(a_all.get(key)), _scalar(b_all.get(key))
        delta = round(b - a, 4) if is_number(a) and is_number(b) else None
        rows.append({
            "metric": key,
            "A": round(a, 4) if isinstance(a, float) else a,
            "B": round(b, 4) if isinstance(b, float) else b,
            "delta": delta,
            "better": judge(key, a, b, same_text, prompt_type)[0],
        })
    return pd.DataFrame(rows, columns=["metric", "A", "B", "delta", "better"])


# The A/B table's rows, grouped; a metric in no group is left out (internals such as repeat
# bigrams or punctuation counts: in the results JSON, not in the table a person reads).
GROUPS = [
    ("speed", "Speed", ("speedup", "decode_s", "cloud_only_s", "tokens_per_s", "wall_s")),
    ("text", "Text", ("matches_baseline", "new_tokens", "hanzi_count", "punct_density", "repeat_rate",
                      "adjacent_repeats", "cycles", "template_leak", "ended_by", "chrf", "emotion_hit")),
    ("draft", "Drafting and verification",
     ("acceptance_rate", "mean_accepted_length", "per_position_acceptance", "nodes_per_call",
      "acceptance_by_depth", "cloud_calls", "cloud_call_rate", "corrections", "rejected_tokens",
      "draft_only_tokens", "target_forwards", "draft_forwards", "cache_desyncs")),
    ("link", "Link", ("link", "link_s", "request_ms_mean", "e2e_s", "e2e_ms_per_token", "ttft_s",
                      "uplink_calls", "bytes_up", "bytes_down", "bytes_per_call")),
]
# Rows that count a failure: shown only when a side has one.
ONLY_IF_ANY = {"cycles", "cache_desyncs", "draft_only_tokens"}


def _delta(key: str, a, b) -> str:
    if not (is_number(a) and is_number(b)) or isinstance(a, bool) or isinstance(b, bool):
        return ""
    d = b - a
    text = f"{abs(100 * d):.1f} pts" if term(key).unit == "%" else fmt(key, abs(d))
    if not any(ch in "123456789" for ch in text):   # zero, or rounds to zero at the shown precision
        return "0"
    return ("+" if d > 0 else "−") + text


def _shown(key: str, ra, rb, vals: dict, no_link: bool, group: str) -> bool:
    if ra is None and rb is None or isinstance(ra, dict) or isinstance(rb, dict):
        return False     # neither side has it (e.g. no threshold, no server)
    if group == "link" and no_link:
        return False
    if key in ONLY_IF_ANY and not (_scalar(ra) or _scalar(rb)):
        return False
    if key == "acceptance_by_depth" and all(d is None or d == p for d, p in zip(
            (ra, rb), vals.get("per_position_acceptance", (None, None)))):
        return False     # a tree's per-position acceptance is its acceptance by depth: one row
    # the wall time and tokens per second of a streamed run include the page's drawing between
    # rounds (the side's cards show them as such): never compared here. The table's decode time,
    # timed on quiet repeats, replaces them; on a busy machine there is no speed row at all
    return key not in ("wall_s", "tokens_per_s")


def _cell_word(win: str, why: str) -> str:
    if win == "=":
        return "within noise" if why.startswith("within noise") or why == IDENTICAL else \
            "same" if why == SAME else "tie"
    return {"A": "A", "B": "B"}.get(win, "—")


def _diff_row(key: str, ra, rb, same_text, prompt_type, samples, identical: bool, tree: bool = False) -> str:
    a, b = _scalar(ra), _scalar(rb)
    if isinstance(a, str) and " / " in a or isinstance(b, str) and " / " in (b or ""):
        a, b = ra, rb     # per-position lists: shown, not compared
    win, why = judge(key, a, b, same_text, prompt_type, samples, tree)
    if ra is not None and ra == rb and not samples and why != TREE_NOTE:   # equal counts, flags or texts: the same,
        win, why = "=", SAME                          # whatever their direction or band
    if identical and win in ("A", "B"):
        win, why = "=", IDENTICAL
    cell = _cell_word(win, why)
    tips = [f' title="{esc(", ".join(fmt(key, x) for x in xs))} over {len(xs)} repeats (median shown)"'
            if samples else "" for xs in (samples or ((), ()))]
    return (f'<tr data-key="{esc(key)}" data-better="{esc(win)}"><th title="{esc(hover(key))}">'
            f'{esc(term(key).label)}</th><td{tips[0]}>{esc(fmt(key, ra))}</td><td{tips[1]}>{esc(fmt(key, rb))}</td>'
            f'<td>{esc("" if isinstance(ra, bool) or isinstance(rb, bool) else _delta(key, a, b))}</td>'
            f'<td class="ss-ab-better ss-ab-better-{esc(cell.split()[0])}" title="{esc(why)}">{esc(cell)}</td></tr>')


def metric_diff_html(metrics_a: dict | None, metrics_b: dict | None, same_text: bool | None = None,
                     prompt_type: str | None = None, extra: list[tuple[str, object, object]] | None = None,
                     timings: dict | None = None, identical: bool = False) -> str:
    """The A/B table a person reads, in groups, with glossary labels, B − A and the better side (why on
    hover); only rows that apply. `extra`: (key, A, B) rows that replace the runs' own; `timings`: key ->
    (A's repeats, B's repeats); `identical`: the two configurations are the same."""
    a_all, b_all = metrics_a or {}, metrics_b or {}
    if not a_all and not b_all:
        return '<div class="ss-none">Run A and B to compare their metrics.</div>'
    vals = {k: (a_all.get(k), b_all.get(k)) for k in set(a_all) | set(b_all)}
    vals.update({k: (a, b) for k, a, b in extra or []})
    no_link = any(m.get("link") == "none" for m in (a_all, b_all) if m)
    tree = any(is_number(m.get("nodes_per_call")) for m in (a_all, b_all))
    rows = []
    for group, title, keys in GROUPS:
        body = [_diff_row(k, *vals[k], same_text, prompt_type, (timings or {}).get(k), identical, tree)
                for k in keys if k in vals and _shown(k, *vals[k], vals, no_link, group)]
        if body:
            note = ""
            if group == "speed" and timings:
                n = len(next(iter(timings.values()))[0])
                note = (f' <span class="ss-ab-group-note">— median of {n} quiet repeats per side; hover a '
                        'value for each repeat</span>')
            rows.append(f'<tr class="ss-ab-group" data-group="{group}"><th colspan="5">{esc(title)}{note}</th></tr>')
            rows += body
    notes = [IDENTICAL] if identical else []
    if tree:
        notes.append("A tree on a side: acceptance per draft, rejected drafts, corrections and edge forwards "
                     "count differently for trees and name no winner; the mean acceptance length compares.")
    if same_text is False:
        notes.append(f"{NOT_COMPARED}; costs are shown without a winner.")
    note = "".join(f'<div class="ss-ab-note">{esc(n)}</div>' for n in notes)
    return ('<div class="ss-ab-table">' + note + '<table><thead><tr><th>metric</th><th>A</th><th>B</th>'
            '<th>change B − A</th><th>better</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table></div>")


def speedup_cell(sp: dict | None):
    """The A/B cell of a speed-up: its number when speed_kind allows one, else the page's words."""
    if not sp:
        return None
    kind = speed_kind(sp)
    if kind == "lossy":
        return f"different output ({sp['speedup']:.2f}×)"
    if kind == "above_bound":
        return f"not shown (above {sp['bound']:.2f}×)"
    if kind == "cloud_off":
        return "not shown (cloud-only time off)"
    return {"busy": "not timed (machine busy)", "none": "no measurable difference"}.get(kind, sp["speedup"])


def vs_cloud_html(text: str | None, base_text: str | None, sp: dict | None = None, label: str = "final text") -> str:
    """Under the final text: the speed-up over cloud-only (as speed_kind allows) and the character diff."""
    same = (text or "") == (base_text or "")
    head = ""
    if sp:
        sp = {**sp, "lossy": sp.get("lossy") or not same}
        cls = {"faster": "fast", "slower": "slow"}.get(speed_kind(sp), "neutral")
        head = (f'<div class="ss-vs-speed ss-vs-{cls}" data-speedup="{sp["speedup"]:.4f}" '
                f'data-lo="{sp["lo"]:.4f}" data-hi="{sp["hi"]:.4f}" data-verdict="{esc(sp["verdict"])}" '
                f'data-lossy="{int(sp["lossy"])}" data-above-bound="{int(bool(sp.get("above_bound")))}" '
                f'title="{esc(hover("speedup"))}"><b>{esc(speedup_words(sp))}</b>'
                f'<div class="ss-vs-times">{esc(speed_times(sp))}</div></div>')
    verdict = ('<span class="ss-vs-same">same text as cloud-only</span>' if same else
               '<span class="ss-vs-diff">differs from cloud-only</span>')
    diff = char_diff_html(base_text, text, names=("cloud-only", label))
    return f'<div class="ss-vs" data-same="{int(same)}">{head}<div class="ss-vs-verdict">{verdict}</div>{diff}</div>'


def char_diff_html(text_a: str | None, text_b: str | None, names: tuple[str, str] = ("A", "B")) -> str:
    """Character diff: text only in the first struck through, text only in the second underlined."""
    a, b = text_a or "", text_b or ""
    if a == b:
        what = "identical texts" if a else "both texts are empty"
        return (f'<div class="ss-diff" data-identical="1"><div class="ss-diff-legend">{what}</div>'
                f'<div class="ss-diff-text">{esc(a)}</div></div>')
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    parts = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        old, new = esc(a[i1:i2]), esc(b[j1:j2])     # a delete has no new text, an insert no old
        parts.append(old if op == "equal" else
                     (f"<del>{old}</del>" if old else "") + (f"<ins>{new}</ins>" if new else ""))
    same = f"{100 * matcher.ratio():.0f}% of characters in common"
    return (
        f'<div class="ss-diff"><div class="ss-diff-legend"><del>only in {esc(names[0])}</del> · <ins>only in {esc(names[1])}</ins> · '
        f'{same}</div><div class="ss-diff-text">{"".join(parts)}</div></div>'
    )
