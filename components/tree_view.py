"""One round's token tree as SVG, coloured as the token view; hover titles give draft and cloud p."""
from __future__ import annotations

import math

from .formatting import DASH, esc, num, visible
from .palette import REJECTED_COLOR, SOURCE_COLORS, SOURCE_TINTS

DX, DY, W, H = 92, 34, 76, 24


def tree_rounds(trace: dict | None) -> list[int]:
    """The round numbers of the trace whose rounds carry a tree."""
    return [r.get("round") for r in (trace or {}).get("rounds") or [] if r.get("tree")]


def picked_tree(trace: dict | None, rnd, id_text=None) -> tuple:
    """(round, its tree): the round asked for when it has a tree, else the first round that has one."""
    have = tree_rounds(trace)
    rnd = int(rnd) if rnd and int(rnd) in have else (have[0] if have else None)
    return rnd, render_tree(trace, rnd, id_text)


def _texts(trace: dict, rnd: int) -> dict:
    """node index -> token text, from the round's committed and rejected records."""
    out = {}
    for t in (trace.get("tokens") or []) + (trace.get("rejected") or []):
        if t.get("round") == rnd and t.get("node") is not None:
            out[t["node"]] = t.get("text")
    return out


def _layout(nodes: list[dict]) -> dict:
    """node index -> (depth, row): leaves take rows in order, a parent sits at its first child's row."""
    kids: dict = {}
    for i, n in enumerate(nodes):
        kids.setdefault(n.get("parent"), []).append(i)
    pos, row = {}, [0]

    def place(i):
        ch = kids.get(i, [])
        for c in ch:
            place(c)
        if not ch:
            pos[i] = (nodes[i]["depth"], row[0])
            row[0] += 1
        else:
            pos[i] = (nodes[i]["depth"], pos[ch[0]][1])
    for c in kids.get(None, []):
        place(c)
    return pos


def _prob(logp) -> str:
    return num(math.exp(logp), 3) if isinstance(logp, (int, float)) else DASH


def _box(x: float, y: float, text: str, fill: str, edge: str, title: str, bold: bool) -> str:
    return (f'<g class="ss-tree-node"><title>{esc(title)}</title>'
            f'<rect x="{x}" y="{y}" width="{W}" height="{H}" rx="5" fill="{fill}" stroke="{edge}" '
            f'stroke-width="{3 if bold else 1}"/><text x="{x + W / 2}" y="{y + 16}" '
            f'text-anchor="middle" font-size="13">{esc(text)}</text></g>')


def render_tree(trace: dict | None, rnd: int | None, id_text=None) -> str:
    """The tree of round `rnd` (a note when it has none); `id_text` names nodes no trace token names."""
    r = next((x for x in (trace or {}).get("rounds") or [] if x.get("round") == rnd), None)
    tree = (r or {}).get("tree")
    if not tree or not tree.get("nodes"):
        return '<div class="ss-empty">No token tree for this round (a chain round, or no round picked).</div>'
    nodes, path = tree["nodes"], set(tree.get("path") or [])
    texts, pos = _texts(trace, rnd), _layout(nodes)
    if id_text is not None:
        texts = {i: texts.get(i, id_text(n["id"])) for i, n in enumerate(nodes)}
    rows = max(y for _, y in pos.values()) + 1
    parts = [_box(4, 4 + (rows - 1) * DY / 2, "root", "#eee", "#444", "the last committed token", True)]
    for i, n in enumerate(nodes):
        d, y = pos[i]
        px, py = (d - 1) * DX + 4, (pos[n["parent"]][1] if n.get("parent") is not None else (rows - 1) / 2)
        on = i in path
        parts.insert(0, f'<line x1="{px + W}" y1="{py * DY + 16}" x2="{d * DX + 4}" y2="{y * DY + 16}" '
                        f'stroke="{SOURCE_COLORS["accepted"] if on else "#bbb"}" stroke-width="{3 if on else 1}"/>')
        title = (f"node {i}: {visible(texts.get(i))!s} (id {n['id']}), depth {d}, {n.get('status')}; "
                 f"draft p {_prob(n.get('draft_logp'))}, cloud p {_prob(n.get('cloud_logp'))}")
        fill, edge = ((SOURCE_TINTS["accepted"], SOURCE_COLORS["accepted"]) if on else ("#f3f3f3", REJECTED_COLOR))
        parts.append(_box(d * DX + 4, y * DY + 4, visible(texts.get(i)) if i in texts else f"#{n['id']}",
                          fill, edge, title, on))
    parts.append(_extra(trace, r, pos, path, nodes, rows))
    width = (max(d for d, _ in pos.values()) + 2) * DX + 8
    return (f'<div class="ss-tree" data-round="{rnd}"><div class="ss-tree-head">round {rnd}: '
            f'{len(nodes)} nodes verified in one cloud call, {len(path)} accepted</div>'
            f'<svg width="{width}" height="{rows * DY + 8}" role="img">{"".join(parts)}</svg></div>')


def _extra(trace, r, pos, path, nodes, rows) -> str:
    """The cloud's correction or bonus token, after the accepted path."""
    start, n = r.get("start", 0), r.get("accepted", 0)
    toks = trace.get("tokens") or []
    t = toks[start + n] if start + n < len(toks) else None
    if t is None or t.get("source") not in ("corrected", "bonus"):
        return ""
    last = max(path, key=lambda i: nodes[i]["depth"]) if path else None
    d, y = (pos[last] if last is not None else (0, (rows - 1) / 2))
    title = f"{t['source']}: {visible(t.get('text'))} from the cloud, p {num(t.get('target_prob'), 3)}"
    return _box((d + 1) * DX + 4, y * DY + 4, visible(t.get("text")), SOURCE_TINTS[t["source"]],
                SOURCE_COLORS[t["source"]], title, True)
