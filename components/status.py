"""Status line and the "what the backend read" panel: pure functions of their inputs -> HTML/Markdown."""
from __future__ import annotations

from .config_panel import INACTIVE_CSS
from .formatting import esc, snake_words, stylesheet


def status_html(kind: str, text: str, detail: str = "", context: list[tuple[str, str]] | None = None) -> str:
    """kind: idle | run | ok | warn | err; `context`: (what, value) badges, a fault's standing out."""
    icon = {"idle": "●", "run": "◌", "ok": "✔", "warn": "▲", "err": "✖"}.get(kind, "●")
    d = f'<span class="ss-status-detail">{esc(detail)}</span>' if detail else ""
    ctx = "".join(
        f'<span class="ss-status-tag{" ss-status-fault" if what == "fault" else ""}" data-what="{esc(what)}">'
        f'{esc(what)}: {esc(snake_words(value) if what == "fault" else value)}</span>'
        for what, value in context or [])
    ctx = f'<span class="ss-status-ctx">{ctx}</span>' if ctx else ""
    return (f'<div class="ss-status ss-status-{kind}" data-state="{kind}"><span class="ss-status-icon">'
            f'{icon}</span><span class="ss-status-text">{esc(text)}</span>{d}{ctx}</div>')


def finished_status(name: str, stopped: bool, *finding_lists) -> tuple[str, str]:
    """(kind, head) of a finished run: never a green "Done" above an error finding."""
    sev = {str(f.get("severity", "")).lower() for fs in finding_lists for f in fs or []}
    if stopped:
        return "err", f"Stopped: {name}"
    if "error" in sev:
        return "err", f"Done, with errors: {name}"
    if "warning" in sev:
        return "warn", f"Done, with warnings: {name}"
    return "ok", f"Done: {name}"


STATUS_CSS = stylesheet("status") + INACTIVE_CSS   # INACTIVE_CSS: knobs greyed in the chosen mode (ui/knobs.py)


def prompt_info_md(info: dict | None) -> str:
    info = info or {}
    parts = []
    prosody = prosody_words(info)
    if prosody:
        parts.append(f"**Prosody read from the clip:** {prosody}")
    if info.get("prosody_normalisation"):
        how = {"speaker": "per speaker (the manifest's speaker column)",
               "clip": "none, single clip (voice register estimated from its F0)"}
        line = how.get(info["prosody_normalisation"], str(info["prosody_normalisation"]))
        note = f": {info['prosody_note']}" if info.get("prosody_note") else ""
        parts.append(f"**Speaker normalisation:** {line}{note}")
    if info.get("condition_tokens"):   # the tokens as the model reads them: raw on purpose
        parts.append("**Condition tokens:** " + " ".join(f"`{t}`" for t in info["condition_tokens"]))
    audio = info.get("audio") or {}
    if audio:
        bits = [f"{audio.get('duration_s')} s", f"{audio.get('source_sr')} Hz", f"{audio.get('channels')} ch"]
        if audio.get("silent"):
            bits.append("**silent**")
        parts.append("**Audio:** " + ", ".join(str(b) for b in bits))
        for w in audio.get("warnings") or []:
            parts.append(f"⚠ {w}")
    if info.get("prompt"):
        parts.append("**Prompt:**\n```\n" + str(info["prompt"]) + "\n```")
    return "\n\n".join(parts) or "_Run a clip to see what the backend read from it._"


# (feature, words, how its value reads): the prosody the backend measured, in words
PROSODY_WORDS = (("pitch", "pitch", lambda v: f"{v:+.1f} semitones from the voice's reference"),
                 ("pvar", "pitch variation", lambda v: f"{v:.1f} semitones"),
                 ("energy", "loudness", lambda v: f"{v:.1f} dBFS"),
                 ("rate", "speech rate", lambda v: f"{v:.1f} syllable nuclei per second"),
                 ("pause", "pauses", lambda v: f"{100 * v:.0f}% of the speaking time"))


def prosody_words(info: dict) -> str:
    """'pitch low (-3.1 semitones from the voice's reference), ...' from the measured bins."""
    values, bins = info.get("prosody") or {}, info.get("bins") or {}
    if not bins:
        return str(info.get("prosody_text") or "")
    out = []
    for feat, name, how in PROSODY_WORDS:
        if feat in bins:
            v = values.get(feat)
            unit = f" ({how(float(v))})" if isinstance(v, (int, float)) and not isinstance(v, bool) else ""
            out.append(f"{name} {bins[feat]}{unit}")
    return ", ".join(out)
