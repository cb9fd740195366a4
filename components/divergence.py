"""Bug or numerics? HTML for where an output leaves cloud-only (analysis/divergence.py) and the probe."""
from __future__ import annotations

from specdec_core.decoding.numerics import probe_line

from .formatting import DASH, esc, stylesheet

DIVERGENCE_CSS = stylesheet("divergence")


def _fmt(x) -> str:
    return DASH if x is None else f"{x:.4g}" if isinstance(x, float) else str(x)


def divergence_title(fd: dict) -> str:
    """The one-line explanation (also the marker's hover text)."""
    u, r = fd.get("user") or {}, fd.get("reference") or {}
    head = (f"leaves cloud-only at token {fd.get('index')}: {u.get('text')!r} here, "
            f"{r.get('text')!r} in cloud-only")
    nums = (f"margin {_fmt(fd.get('margin_reference'))} (reference, width "
            f"{_fmt(fd.get('width_reference'))}) vs {_fmt(fd.get('margin_user'))} (decoder, width "
            f"{_fmt(fd.get('width_user'))})")
    if fd.get("cause") == "numerics":
        return (f"{head} — numerics, not a bug: {nums}; the texts differ from here on, the rest "
                "is checked against the decoder's own forwards")
    see = f"; see {fd['explained_by']}" if fd.get("explained_by") else ""
    return f"{head} — decoder: {fd.get('why') or 'not a numerics flip'}{see}; {nums}"


def divergence_marker(fd: dict | None) -> str:
    """A small labelled marker to put before the divergent token in the token view."""
    if not fd:
        return ""
    cause = "numerics" if fd.get("cause") == "numerics" else "decoder"
    return (f'<span class="ss-div ss-div-{cause}" data-divergence="{cause}" '
            f'data-index="{esc(fd.get("index"))}" tabindex="0" '
            f'title="{esc(divergence_title(fd))}">⟂ {cause}</span>')


def numerics_html(num: dict | None, fd: dict | None = None) -> str:
    """Inspect's block: the numerics probe's line and, with a reference, the divergence verdict."""
    parts = [esc(t) for t in (probe_line(num), divergence_title(fd) if fd else "") if t]
    if not parts:
        return ""
    return ('<div class="ss-numerics" data-section="numerics"><b>bug or numerics?</b> '
            + "<br>".join(parts) + "</div>")
