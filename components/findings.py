"""Findings as HTML, the one renderer of every tab: severity-coloured cards, errors first, symptoms
folded under their root, the not-clean cases said so; also status-line summaries and config badges."""
from __future__ import annotations

from specdec_core.findings import SEVERITIES, from_json

from .config_panel import SPECS_BY_NAME
from .formatting import DASH, esc, fault_label, num, stylesheet, visible

# severity -> (icon, css class). Icons are distinct glyphs, not just colours.
SEVERITY = {"error": ("✖", "error"), "critical": ("✖", "error"), "warning": ("▲", "warning"),
            "warn": ("▲", "warning"), "info": ("ℹ", "info"), "ok": ("✔", "ok"), "pass": ("✔", "ok")}
ORDER = {s: i for i, s in enumerate(SEVERITIES + ("ok",))}

FINDINGS_CSS = stylesheet("findings")


SHOWN_IDS, SHOWN_VALUES = 24, 8     # a long id list shows this many as text; other lists, values


def _id_key(key) -> bool:
    """Evidence keys whose integers are token ids (tokens, ids, lost, token_ids, ...)."""
    k = str(key).lower()
    return "token" in k or k.endswith("ids") or k in ("id", "lost", "drafted", "fed", "committed")


def _count_key(key) -> bool:
    """Keys under a token-id key that still hold counts, ranks or positions, not ids."""
    k = str(key).lower()
    return k.startswith("n_") or any(w in k for w in ("rank", "position", "forward", "round", "logp", "prob"))


def _value(v, ids: bool, texts) -> str:
    """One evidence value in words: ids with their text, long lists cut, objects as `key value` pairs."""
    if isinstance(v, bool) or v is None:
        return str(v).lower() if v is not None else DASH
    if isinstance(v, float):
        return num(v, 3)
    if isinstance(v, int):
        return f"{v} «{visible(texts(v))}»" if ids and texts else str(v)
    if isinstance(v, dict):
        return " · ".join(f"{fault_label(k)} {_value(x, _id_key(k) or (ids and not _count_key(k)), texts)}"
                          for k, x in v.items())
    if isinstance(v, (list, tuple)):
        flat = all(isinstance(x, int) and not isinstance(x, bool) for x in v)
        if ids and texts and flat and len(v) > 3:
            cut = "".join(visible(texts(x)) for x in v[:SHOWN_IDS])
            return f"«{cut}{'…' if len(v) > SHOWN_IDS else ''}» ({len(v)} tokens)"
        shown = ", ".join(_value(x, ids, texts) for x in v[:SHOWN_VALUES])
        return shown + (f", … ({len(v)} in all)" if len(v) > SHOWN_VALUES else "")
    return str(v)


def evidence_lines(ev: dict | None, texts=None) -> list[str]:
    """A finding's evidence as `key: value` lines (plain text); `texts` decodes token ids."""
    return [f"{str(k).replace('_', ' ')}: {_value(v, _id_key(k), texts)}"
            for k, v in (ev or {}).items() if v not in (None, [], {}, "")]


def _evidence(ev: dict | None, texts=None) -> str:
    lines = evidence_lines(ev, texts)
    if not lines:
        return ""
    return ('<div class="ss-rf-ev">evidence:' + "".join(f'<div class="ss-rf-evl">{esc(x)}</div>' for x in lines)
            + "</div>")


NOT_CHECKED = ("Not checked by the cloud: the cloud never ran (no cloud call), so nothing committed was "
               "verified, and the checks that read the cloud's scores had nothing to judge.")
CLEAN = ("caches, positions, context, acceptance against the cloud, stops and the returned ids agree "
         "with what the two models were fed and scored.")


def findings_html(findings: list[dict] | None, texts=None, cloud_calls: int | None = None,
                  latent: list | None = None, error: str | None = None) -> str:
    """Errors first, one card per root finding, its symptoms folded under it; `texts` decodes ids.
    No finding is not always a clean bill: `cloud_calls` 0, a `latent` fault or a run's `error` say so."""
    if findings is None:
        return '<div class="ss-findings"><div class="ss-none">No findings yet: nothing has run.</div></div>'
    if findings:
        # old files: `key` for `code`, and a severity-"ok" 'clean' row, shown as it was
        roots, nested = split_explained([{**from_json(f), "severity": f.get("severity")} for f in findings])
        cards = [_card(f, nested.get(f["code"], []), texts) for f in roots]
    elif error:
        cards = [_box("error", 'data-run-error="1"', esc(f"The recorded run ended in an error: {error}"),
                      _detail("None of the checks fired on what was recorded before it."))]
    elif latent:
        cards = [_box("info", 'data-latent="1"', esc("No findings at these knobs, and a fault that is on "
                                                     "does nothing here: " + "; ".join(latent)))]
    elif cloud_calls == 0:
        cards = [_box("info", 'data-not-checked="1"', esc(NOT_CHECKED))]
    else:
        cards = [_box("ok", 'data-clean="1"', "No findings: none of the checks fired, nothing was found",
                      _detail(CLEAN))]
    return '<div class="ss-findings">' + "".join(cards) + "</div>"


def _detail(text: str, label: str = "", cls: str = "detail") -> str:
    return f'<div class="ss-finding-{cls}">' + (f"<b>{label}:</b> " if label else "") + f"{esc(text)}</div>"


def _card(f: dict, children: list, texts=None) -> str:
    """One finding: title and code, what / likely cause / fix, evidence, its symptoms folded."""
    rows = "".join(_detail(f[key], label, "fix" if key == "fix" else "detail")
                   for key, label in (("detail", "What"), ("cause", "Likely cause"), ("fix", "Fix")) if f.get(key))
    folded = (f'<details class="ss-finding-explained"><summary>{len(children)} symptom(s) explained by '
              f'this finding</summary>{"".join(_card(c, [], texts) for c in children)}</details>') if children else ""
    by = f' data-explained-by="{esc(f["explained_by"])}"' if f.get("explained_by") else ""
    title = (f'{esc(f.get("title"))}<span class="ss-finding-code" title="the finding\'s code (JSON, CLI)">'
             f'{esc(f["code"])}</span>')
    return _box(f.get("severity"), f'data-code="{esc(f["code"])}"{by}', title,
                rows + _evidence(f.get("evidence"), texts) + folded)


def _box(severity, attrs: str, title_html: str, body: str = "") -> str:
    """A card: the severity's icon and colour, the title, the rest in the wide column."""
    icon, cls = SEVERITY.get(str(severity or "").lower(), SEVERITY["info"])
    return (f'<div class="ss-finding ss-sev-{cls}" data-severity="{cls}" {attrs}>'
            f'<div class="ss-finding-icon ss-icon-{cls}" aria-label="{cls}">{icon}</div>'
            f'<div class="ss-finding-title">{title_html}</div>{body}</div>')


def split_explained(findings: list[dict]) -> tuple[list, dict]:
    """(roots by severity, {root code: the findings it explains})."""
    codes = {f.get("code") for f in findings}
    nested: dict = {}
    for f in findings:
        if f.get("explained_by") in codes:
            nested.setdefault(f["explained_by"], []).append(f)
    roots = [f for f in findings if f.get("explained_by") not in codes]
    return sorted(roots, key=lambda f: ORDER.get(str(f.get("severity")), 9)), nested


def findings_count(findings: list[dict]) -> str:
    """The findings as the cards count them: "1 finding (1 error), and 1 symptom it explains"."""
    if not findings:
        return "no findings"
    roots, nested = split_explained(findings)
    errs, folded = sum(f.get("severity") == "error" for f in roots), sum(map(len, nested.values()))
    out = f"{len(roots)} finding{'s' if len(roots) != 1 else ''} ({errs} error{'s' if errs != 1 else ''})"
    return out + (f", and {folded} symptom{'s' if folded != 1 else ''} "
                  f"{'it explains' if len(roots) == 1 else 'they explain'}" if folded else "")


def findings_summary(findings: list[dict] | None, sep: str = " · ", tail: str = " — see Diagnostics") -> str:
    """' · ✖ 1 error (lossless violation) · ▲ 1 warning — see Diagnostics'; empty when clean."""
    roots = [f for f in map(from_json, findings or []) if not f["explained_by"]]   # symptoms fold under them
    parts = []
    for cls in ("error", "warning"):
        codes = [f["code"] for f in roots if SEVERITY.get(f["severity"], ("", "info"))[1] == cls]
        if codes:
            parts.append(f"{SEVERITY[cls][0]} {len(codes)} {cls}{'s' if len(codes) > 1 else ''} "
                         f"({', '.join(map(fault_label, codes))})")
    return (sep + sep.join(parts) + tail) if parts else ""


def config_badges(config: dict | None) -> str:
    """The run's knobs as small badges, by their Live panel labels; enabled faults stand out
    (configuration, not diagnosis)."""
    if not config:
        return ""
    declared = config.get("declared") or config
    keys = ("k", "verify", "temperature", "max_new_tokens", "entropy_threshold")
    out = [f'<span class="ss-badge" data-knob="{esc(k)}">{esc(SPECS_BY_NAME[k].label)}: {esc(declared[k])}</span>'
           for k in keys if declared.get(k) not in (None, "")]
    if config.get("recorded"):
        out.insert(0, '<span class="ss-badge">recorded run</span>')
    out += [f'<span class="ss-badge ss-badge-fault" data-fault="{esc(n)}">fault: {esc(fault_label(n))}</span>'
            for n in config.get("faults") or []]
    return '<div class="ss-badges">' + "".join(out) + "</div>"
