"""The coloured token trace: a span per committed token, rejected drafts struck through, CSS-only
tooltips (gr.HTML runs no scripts). Works on partial and empty traces."""

from __future__ import annotations

from collections import Counter
from itertools import groupby

from .divergence import DIVERGENCE_CSS, divergence_marker
from .formatting import DASH, esc, num, stylesheet, visible
from .palette import CYCLE_COLOR, REJECTED_COLOR, SOURCE_COLORS, SOURCE_LABELS, SOURCE_TINTS

SOURCES = ("accepted", "corrected", "draft", "bonus")

_SOURCE_CSS = "\n".join(
    f".ss-src-{s} {{ background: {SOURCE_TINTS[s]}; border-color: {SOURCE_COLORS[s]}; }}\n"
    f".ss-tip-src-{s} {{ color: {SOURCE_COLORS[s]}; }}\n"
    f".ss-tip-head .ss-tip-src-{s} {{ filter: brightness(1.6); font-weight: 600; }}"
    for s in SOURCES
)

TOKEN_CSS = (stylesheet("tokens").replace("/* SOURCE_CSS */", _SOURCE_CSS)
             .replace("REJECTED_COLOR", REJECTED_COLOR).replace("CYCLE_COLOR", CYCLE_COLOR))
TOKEN_CSS += DIVERGENCE_CSS


def _tooltip(rec: dict, kind: str, index_label: str, note: str = "") -> str:
    fields = [
        ("id", rec.get("id")),
        ("round", rec.get("round")),
        ("drafted by", rec.get("drafter") or ("cloud" if rec.get("source") in ("corrected", "bonus") else None)),
        ("entropy", f"{num(rec.get('entropy'), 2)} nats" if rec.get("entropy") is not None else DASH),
        ("edge p", num(rec.get("draft_prob"))),
        ("cloud p", num(rec.get("target_prob"))),
        ("cloud rank", rec.get("target_rank")),
        ("audio dep", num(rec.get("audio_dependence"), 2)),
    ]
    grid = "".join(
        f'<span class="ss-tip-k">{esc(k)}</span><span class="ss-tip-v">{esc(DASH if v is None else v)}</span>'
        for k, v in fields
    )
    top = rec.get("top") or []
    alts = " · ".join(
        f'<span class="ss-tip-alt">{esc(visible(a.get("text")))} {esc(num(a.get("prob"), 2))}</span>' for a in top[:5]
    )
    top_html = f'<span class="ss-tip-top">edge top: {alts}</span>' if alts else ""
    label = SOURCE_LABELS.get(kind, kind)
    return (
        '<span class="ss-tip" role="tooltip">'
        f'<span class="ss-tip-head">{esc(index_label)} 「{esc(visible(rec.get("text")))}」 '
        f'<span class="ss-tip-src-{esc(kind)}">{esc(label)}</span></span>'
        f'<span class="ss-tip-grid">{grid}</span>{top_html}'
        + (f'<span class="ss-tip-note">{esc(note)}</span>' if note else "")
        + "</span>"
    )


def _token_span(tok: dict, in_cycle: bool, dropped: list[dict], colour: str = "source",
                verified_rounds: frozenset = frozenset()) -> str:
    source = str(tok.get("source") or "unknown")
    i = tok.get("i")
    note = ""
    if source == "corrected" and dropped:
        note = "replaced rejected draft 「" + "".join(visible(r.get("text")) for r in dropped[:1]) + "」"
    elif source == "draft" and tok.get("round") in verified_rounds:
        note = ("unchecked: its round called the cloud, but this token was not among the drafts "
                "the cloud checked (the commit added it)")
    elif source == "draft":
        note = "unchecked: the cloud was not called for this block"
    elif source == "bonus":
        note = "extra cloud token after a fully accepted block"
    if in_cycle:
        note = (note + "; " if note else "") + "part of a detected cycle"
    classes = f"ss-tok ss-src-{esc(source)}" + (" ss-cycle" if in_cycle else "")
    return _span(classes, tok, f'data-i="{esc(i)}" data-source="{esc(source)}"',
                 _fill(tok, colour), _tooltip(tok, source, f"#{i}", note))


def _span(classes: str, rec: dict, attrs: str, style: str, tip: str) -> str:
    """A token's focusable span (committed or rejected): its text and its tooltip."""
    return (f'<span class="{classes}" tabindex="0" {attrs} data-round="{esc(rec.get("round"))}" '
            f'data-id="{esc(rec.get("id"))}"{style}><span class="ss-t">{esc(visible(rec.get("text")))}</span>'
            f"{tip}</span>")


def _rejected_span(rej: dict, first: bool = True) -> str:
    """`first`: its round's first dropped draft, the one the cloud rejected (the rest went unscored)."""
    at = rej.get("at")
    head = f"draft of round {rej.get('round', DASH)}"   # the tooltip's kind label says "rejected"
    rank = rej.get("target_rank")
    if not first and rank is None:
        note = "dropped unscored: an earlier draft of its round was rejected, so the cloud never scored this one"
    else:
        note = "dropped: the cloud rejected it" + (f" (its rank {rank} under the cloud)"
                                                   if rank is not None else " (its cloud rank was not recorded)")
    if at is not None:
        note += f"; replaced by token #{at}"
    return _span("ss-tok ss-rej", rej, f'data-source="rejected" data-at="{esc(at)}"', "",
                 _tooltip(rej, "rejected", head, note))


def cycle_indices(trace: dict) -> set[int]:
    """Token indices inside a cycle: per-token flags, trace cycles, or live cycle warnings."""
    idx = {t.get("i", n) for n, t in enumerate(trace.get("tokens") or []) if t.get("cycle")}
    spans = list(trace.get("cycles") or [])
    spans += [w for w in trace.get("warnings") or [] if w.get("kind") == "cycle"]
    for span in spans:
        start, end = span.get("start"), span.get("end")
        if isinstance(start, int) and isinstance(end, int):
            idx.update(range(start, end))
    return idx


def _item(sample: str, label: str, count: int | None = None) -> str:
    """One legend entry (of the source legend and of the colour keys): sample, label, count."""
    c = f' <span class="ss-legend-count">{count}</span>' if count is not None else ""
    return f'<span class="ss-legend-item">{sample}{esc(label)}{c}</span>'


def _chip(cls: str = "", style: str = "") -> str:
    """A legend's sample token: a token class (' ss-rej') or a background."""
    return f'<span class="ss-tok{cls}"{style}><span class="ss-t">字</span></span>'


def _legend(counts: dict[str, int], n_rejected: int, n_cycle: int, folded: bool = False) -> str:
    parts = [_item(_chip(f" ss-src-{s}"), SOURCE_LABELS[s], counts.get(s, 0)) for s in SOURCES]
    parts.append(_item(_chip(" ss-rej"), "rejected draft" + (" (a tree round's: ✂ count, hover or click it)"
                                                             if folded else ""), n_rejected))
    parts.append(_item(_chip(" ss-cycle"), "cycle", n_cycle))
    parts.append(_item('<span class="ss-legend-rounds"><span class="ss-round ss-round-even">字字</span>'
                       '<span class="ss-round ss-round-odd">字</span></span>', "rounds"))
    parts.append('<span class="ss-legend-hint">hover or tab to a token for details</span>')
    return '<div class="ss-legend" aria-label="legend">' + "".join(parts) + "</div>"


EMPTY_HINT = "No tokens yet: press ▶ Run."


def render_tokens(trace: dict | None, highlight_cycles: bool = True, live: bool = False,
                  empty: str = EMPTY_HINT, colour: str = "source") -> str:
    """The trace view's HTML (TOKEN_CSS is the page's); `live` adds a caret; `colour`: one of COLOURINGS."""
    trace = trace or {}
    tokens = list(trace.get("tokens") or [])
    rejected = list(trace.get("rejected") or [])
    in_cycle = cycle_indices(trace) if highlight_cycles else set()
    groups = _round_groups(_trace_items(trace, tokens, rejected, in_cycle, colour))
    counts = Counter(tok.get("source") for tok in tokens)
    n_cycle = len([i for i in in_cycle if 0 <= i < len(tokens)])
    body = "".join(groups) if groups else f'<span class="ss-empty">{esc(empty)}</span>'
    caret = '<span class="ss-caret" aria-hidden="true">▍</span>' if live else ""
    return (
        '<div class="ss-trace">'
        + _legend(counts, None if (trace.get("info") or {}).get("rejected_unknown") else len(rejected), n_cycle,
                  any(r.get("node") is not None for r in rejected))
        + "".join(colour_legend(c, hidden=c != colour) for c in COLOURINGS[1:])
        + f'<div class="ss-tokens">{body}{caret}</div></div>'
    )


def _trace_items(trace: dict, tokens: list[dict], rejected: list[dict], in_cycle: set,
                 colour: str) -> list[tuple[object, str]]:
    """(round, html) items in display order: rejected drafts sit just before their correction."""
    by_at: dict[int, list[dict]] = {}
    trailing: list[dict] = []  # rejected with no committed replacement yet (mid-stream)
    for rej in rejected:
        at = rej.get("at")
        if isinstance(at, int) and 0 <= at < len(tokens):
            by_at.setdefault(at, []).append(rej)
        else:
            trailing.append(rej)
    verified = frozenset(r.get("round") for r in trace.get("rounds") or [] if r.get("verified"))
    seen_rounds: set = set()

    def rej_span(rej: dict) -> str:
        first = rej.get("round") not in seen_rounds
        seen_rounds.add(rej.get("round"))
        return _rejected_span(rej, first)

    # {round: its rejected tree nodes}: a tree verifies many siblings per round (70–87 in a dynamic
    # tree's run); inline they would bury the text, so each round gets one mark (fold_span)
    folds: dict = {}
    for rej in rejected:
        if rej.get("node") is not None:
            folds.setdefault(rej.get("round"), []).append(rej)
    items: list[tuple[object, str]] = []
    fd = (trace.get("reference") or {}).get("first_divergence")   # bug or numerics? (issue 27)
    for n, tok in enumerate(tokens):
        dropped = by_at.get(n, [])
        items += [(rej.get("round"), rej_span(rej)) for rej in dropped if rej.get("node") is None]
        if fd and fd.get("index") == n:
            items.append((tok.get("round"), divergence_marker(fd)))
        if tok.get("source") in ("corrected", "bonus") and tok.get("round") in folds:
            items.append((tok.get("round"), fold_span(tok.get("round"), folds.pop(tok.get("round")))))
        items.append((tok.get("round"), _token_span(tok, tok.get("i", n) in in_cycle, dropped, colour,
                                                    verified)))
    items += [(rej.get("round"), rej_span(rej)) for rej in trailing if rej.get("node") is None]
    items += [(rnd, fold_span(rnd, rejs)) for rnd, rejs in folds.items()]
    if fd and fd.get("index") == len(tokens) and tokens:
        items.append((tokens[-1].get("round"), divergence_marker(fd)))
    return items


# One click on a round's mark: the Live / Inspect tree view of that round (its round field set
# and submitted), with the view scrolled into sight.
SHOW_TREE_JS = ("const n=this.dataset.round;for(const id of ['live-tree-round','inspect-tree-round']){"
                "const i=document.querySelector('#'+id+' input');if(!i||!i.offsetParent)continue;"
                "i.value=n;i.dispatchEvent(new Event('input',{bubbles:true}));"
                "for(const t of ['keydown','keypress'])i.dispatchEvent(new KeyboardEvent(t,{key:'Enter',code:'Enter',"
                "keyCode:13,which:13,bubbles:true}));"
                "i.scrollIntoView({block:'center'});}")


def fold_span(rnd, rejs: list[dict]) -> str:
    """One mark for a tree round's rejected siblings: hover or click lists them, a button opens its tree."""
    inner = "".join(_rejected_span(r, True) for r in rejs)
    return (f'<span class="ss-fold" tabindex="0" data-round="{esc(rnd)}" data-rejected="{len(rejs)}">'
            f'<span class="ss-fold-mark" title="round {esc(rnd)}: {len(rejs)} rejected tree node(s); '
            f'hover or click to list them">✂{len(rejs)}</span><span class="ss-fold-list">{inner}'
            f'<button type="button" class="ss-fold-tree" data-round="{esc(rnd)}" onclick="{esc(SHOW_TREE_JS)}">'
            f'tree of round {esc(rnd)} ↓</button></span></span>')


def _round_groups(items: list[tuple[object, str]]) -> list[str]:
    """Consecutive items of one round wrapped together, alternating underlines."""
    return [f'<span class="ss-round ss-round-{"odd" if n % 2 else "even"}" data-round="{esc(rnd)}">'
            + "".join(frag for _, frag in run) + "</span>"
            for n, (rnd, run) in enumerate(groupby(items, key=lambda item: item[0]))]


# ---- the colourings: by source (default), by audio dependence, by cloud rank (GLTR) ----------
COLOURINGS = ("source", "audio dependence", "cloud rank")
DEPENDENCE_FULL = 3.0     # nats at which the dependence tint is at full strength
# GLTR (Gehrmann et al., 2019): the rank of the token under the judging model, in four buckets.
RANK_BUCKETS = ((10, "#B7E4C7", "top 10"), (100, "#FFF3B0", "top 100"),
                (1000, "#F8C1B8", "top 1000"), (None, "#D9C2F0", "beyond 1000"))
UNRANKED = "#EEEEEE"


def dependence_fill(nats) -> str | None:
    """Background for a token's audio dependence: white (0 nats) to violet (>= 3 nats)."""
    if not isinstance(nats, (int, float)) or isinstance(nats, bool) or nats != nats:
        return None
    a = max(0.0, min(1.0, float(nats) / DEPENDENCE_FULL))
    return f"rgba(117, 68, 189, {0.08 + 0.62 * a:.2f})" if a > 0.01 else "#FFFFFF"


def rank_fill(rank, source: str | None = None) -> str:
    """GLTR colour of the cloud's rank of a token; its own tokens (corrected, bonus) count as rank 1."""
    if rank is None and source in ("corrected", "bonus"):
        rank = 1
    if not isinstance(rank, int) or isinstance(rank, bool):
        return UNRANKED
    return next(colour for limit, colour, _ in RANK_BUCKETS if limit is None or rank <= limit)


def _fill(tok: dict, colour: str) -> str:
    """Both colourings as CSS variables (the toggle picks one, no re-render), and `colour`'s background."""
    dep = dependence_fill(tok.get("audio_dependence")) or UNRANKED
    rank = rank_fill(tok.get("target_rank"), tok.get("source"))
    chosen = {"audio dependence": dep, "cloud rank": rank}.get(colour)
    bg = f"; background: {chosen}" if chosen else ""
    return f' style="--ss-dep: {dep}; --ss-rank: {rank}{bg}"'


def colour_legend(colour: str, hidden: bool = False) -> str:
    """The key of a non-source colouring ('' for source: the main legend says it)."""
    def chip(c, label):
        return _item(_chip(style=f' style="background: {c}"'), label)

    if colour == "audio dependence":
        parts = [chip(dependence_fill(v), f"{v:g} nats") for v in (0, 0.5, 1.5, 3)]
        parts.append(chip(UNRANKED, "not measured"))
        title = "audio dependence (KL with vs without the clip, cloud):"
    elif colour == "cloud rank":
        parts = [chip(c, label) for _, c, label in RANK_BUCKETS] + [chip(UNRANKED, "not verified")]
        title = "cloud rank of the token (GLTR):"
    else:
        return ""
    slug = "dep" if colour == "audio dependence" else "rank"
    return (f'<div class="ss-legend ss-colour-legend ss-key-{slug}{" ss-hidden" if hidden else ""}" '
            f'aria-label="colour key"><span class="ss-legend-item">{esc(title)}</span>'
            + "".join(parts) + "</div>")


def colour_radio_css(radio_class: str = "ss-colour-radio") -> str:
    """CSS by which a radio placed before the token panel recolours the tokens in the browser."""
    out = [".ss-colour-legend.ss-hidden { display: none; }"]
    for value, var, slug in (("audio dependence", "--ss-dep", "dep"), ("cloud rank", "--ss-rank", "rank")):
        on = f'.{radio_class}:has(input[value="{value}"]:checked) ~ .ss-tokens-panel'
        out.append(f"{on} .ss-tokens .ss-tok:not(.ss-rej) {{ background: var({var}, {UNRANKED}) !important; }}")
        out.append(f"{on} .ss-colour-legend.ss-key-{slug} {{ display: flex; }}")
    return "\n".join(out)


# the colour toggle's rules travel with the token view's CSS (ALL_CSS picks them up)
TOKEN_CSS += colour_radio_css()
