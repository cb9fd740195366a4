"""Status line and the "what the backend read" panel: pure functions of their inputs -> HTML/Markdown."""
from __future__ import annotations

import html


def status_html(kind: str, text: str, detail: str = "") -> str:
    """kind: idle | run | ok | err."""
    icon = {"idle": "●", "run": "◌", "ok": "✔", "err": "✖"}.get(kind, "●")
    d = f'<span class="ss-status-detail">{html.escape(detail)}</span>' if detail else ""
    return (f'<div class="ss-status ss-status-{kind}" data-state="{kind}"><span class="ss-status-icon">'
            f'{icon}</span><span class="ss-status-text">{html.escape(text)}</span>{d}</div>')


def prompt_info_md(info: dict | None) -> str:
    info = info or {}
    parts = []
    if info.get("prosody_text"):
        parts.append(f"**Prosody read from the clip:** {info['prosody_text']}")
    if info.get("prosody_normalisation"):
        how = {"speaker": "per speaker (the manifest's speaker column)",
               "clip": "none, single clip (voice register estimated from its F0)"}
        line = how.get(info["prosody_normalisation"], str(info["prosody_normalisation"]))
        note = f": {info['prosody_note']}" if info.get("prosody_note") else ""
        parts.append(f"**Speaker normalisation:** {line}{note}")
    if info.get("condition_tokens"):
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

