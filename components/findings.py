"""Findings of the flight recorder (blind checks) as HTML: severity-coloured cards with the
stable code, title, detail, cause, fix and evidence; and a badge of the run's configuration.
Pure functions of the findings / config dicts."""
from __future__ import annotations

from .formatting import DASH, esc, fault_label, num, visible

SEV = {"error": ("✖", "#D55E00", "#fff1e8"), "warning": ("⚠", "#9a6700", "#fff8c5"),
       "info": ("ℹ", "#0072B2", "#eef6fc"), "ok": ("✔", "#009E73", "#edf8f3")}
ORDER = {"error": 0, "warning": 1, "info": 2, "ok": 3}

FINDINGS_CSS = """
.ss-rf { display: flex; flex-direction: column; gap: 8px; font-family: system-ui, sans-serif; }
.ss-rf-card { border-left: 5px solid; border-radius: 6px; padding: 8px 12px; }
.ss-rf-head { display: flex; gap: 8px; align-items: baseline; flex-wrap: wrap; }
.ss-rf-code { font-family: ui-monospace, monospace; font-size: 11px; color: #6e7781; }
.ss-rf-title { font-weight: 650; }
.ss-rf-row { font-size: 13.5px; margin-top: 3px; }
.ss-rf-explained > summary { cursor: pointer; white-space: nowrap; margin-top: 4px; }
.ss-rf-ev { font-family: ui-monospace, monospace; font-size: 12px; color: #57606a; margin-top: 3px; }
.ss-rf-evl { padding-left: 1.2em; overflow-wrap: anywhere; }
.ss-badges { display: flex; gap: 6px; flex-wrap: wrap; }
.ss-badge { font-size: 12.5px; padding: 2px 8px; border-radius: 10px; background: #f6f8fa;
  border: 1px solid #d8dee4; font-family: ui-monospace, monospace; }
.ss-badge-fault { background: #fff1e8; border-color: #f0b48c; }
"""


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
    """One evidence value in words: a token id with its text, a long id list as text (cut
    after SHOWN_IDS), a long list cut after SHOWN_VALUES, an object as `key value` pairs."""
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
    """A finding's evidence as readable `key: value` lines (plain text, not escaped); `texts`
    (token id -> text) decodes token ids."""
    return [f"{str(k).replace('_', ' ')}: {_value(v, _id_key(k), texts)}"
            for k, v in (ev or {}).items() if v not in (None, [], {}, "")]


def _evidence(ev: dict | None, texts=None) -> str:
    lines = evidence_lines(ev, texts)
    if not lines:
        return ""
    return ('<div class="ss-rf-ev">evidence:' + "".join(f'<div class="ss-rf-evl">{esc(x)}</div>' for x in lines)
            + "</div>")


NOT_CHECKED = ("Not checked by the cloud: the recording has no cloud forward, so nothing the decoder "
               "committed was verified, and the checks that read the cloud's scores had nothing to judge.")


def findings_html(findings: list[dict] | None, texts=None, cloud_forwards: int | None = None) -> str:
    """Error first; one card per finding, its colour and icon from the severity. `texts` (token
    id -> text) shows the evidence's token ids as text. `cloud_forwards` 0 with no finding: "not
    checked by the cloud", never a green "No findings"."""
    if findings is None:
        return '<div class="ss-rf"><div class="ss-none">No findings yet: record or upload a run.</div></div>'
    if not findings and cloud_forwards == 0:
        return ('<div class="ss-rf"><div class="ss-rf-card" data-not-checked="1" '
                f'style="border-color:{SEV["info"][1]};background:{SEV["info"][2]}">'
                f'<div class="ss-rf-head"><span style="color:{SEV["info"][1]}">{SEV["info"][0]}</span>'
                f'<span class="ss-rf-title">{esc(NOT_CHECKED)}</span></div></div></div>')
    if not findings:
        return ('<div class="ss-rf"><div class="ss-rf-card ss-rf-clean" data-clean="1" '
                f'style="border-color:{SEV["ok"][1]};background:{SEV["ok"][2]}">'
                f'<div class="ss-rf-head"><span style="color:{SEV["ok"][1]}">{SEV["ok"][0]}</span>'
                '<span class="ss-rf-title">No findings: nothing was found in this recording</span></div>'
                '<div class="ss-rf-row">None of the blind checks fired: caches, positions, context, '
                'acceptance against the cloud, stops and the returned ids agree with what the two '
                'models were fed and scored.</div></div></div>')
    roots, nested = split_explained(findings)
    cards = [_card(f, nested.get(f.get("code"), []), texts) for f in roots]
    return '<div class="ss-rf">' + "".join(cards) + "</div>"


def findings_count(findings: list[dict]) -> str:
    """The findings as the cards show them: the top-level ones (errors among them) and the
    symptoms folded under them, e.g. "1 finding (1 error), and 1 symptom it explains"."""
    if not findings:
        return "no findings"
    roots, nested = split_explained(findings)
    errs, folded = sum(f.get("severity") == "error" for f in roots), sum(map(len, nested.values()))
    out = f"{len(roots)} finding{'s' if len(roots) != 1 else ''} ({errs} error{'s' if errs != 1 else ''})"
    return out + (f", and {folded} symptom{'s' if folded != 1 else ''} "
                  f"{'it explains' if len(roots) == 1 else 'they explain'}" if folded else "")


def split_explained(findings: list[dict]) -> tuple[list, dict]:
    """(root findings by severity, {root code: the findings it explains}): a finding whose
    explained_by names a finding present is folded under it."""
    codes = {f.get("code") for f in findings}
    nested: dict = {}
    for f in findings:
        if f.get("explained_by") in codes:
            nested.setdefault(f["explained_by"], []).append(f)
    roots = [f for f in findings if f.get("explained_by") not in codes]
    return sorted(roots, key=lambda f: ORDER.get(str(f.get("severity")), 9)), nested


def _card(f: dict, children: list, texts=None) -> str:
    sev = str(f.get("severity") or "info")
    icon, colour, tint = SEV.get(sev, SEV["info"])
    rows = "".join(f'<div class="ss-rf-row"><b>{label}:</b> {esc(f[key])}</div>'
                   for key, label in (("detail", "What"), ("cause", "Likely cause"), ("fix", "Fix"))
                   if f.get(key))
    inner = "".join(_card(c, [], texts) for c in children)
    folded = (f'<details class="ss-rf-explained"><summary>{len(children)} symptom(s) explained by '
              f'this finding</summary>{inner}</details>') if children else ""
    explained = f' data-explained-by="{esc(f["explained_by"])}"' if f.get("explained_by") else ""
    return (f'<div class="ss-rf-card" data-code="{esc(f.get("code"))}" data-severity="{esc(sev)}"{explained} '
            f'style="border-color:{colour};background:{tint}">'
            f'<div class="ss-rf-head"><span style="color:{colour}">{icon}</span>'
            f'<span class="ss-rf-title">{esc(f.get("title"))}</span>'
            f'<span class="ss-rf-code" title="the finding\'s code (JSON, CLI)">{esc(f.get("code"))}</span></div>'
            f'{rows}{_evidence(f.get("evidence"), texts)}{folded}</div>')


def _knob_label(name: str) -> str:
    """A knob's label as the Live panel shows it ("max new tokens"), not its field name."""
    from specdec_core.decoding.config import DecodeConfig
    from specdec_core.decoding.knobs import schema

    spec = schema(DecodeConfig).get(name)
    return spec.label if spec is not None and spec.label else name.replace("_", " ")


def config_badges(config: dict | None) -> str:
    """The run's knobs as small badges; enabled faults stand out (configuration, not diagnosis)."""
    if not config:
        return ""
    declared = config.get("declared") or config
    keys = ("k", "verify", "temperature", "max_new_tokens", "entropy_threshold")
    out = [f'<span class="ss-badge" data-knob="{esc(k)}">{esc(_knob_label(k))}: {esc(declared[k])}</span>'
           for k in keys if declared.get(k) not in (None, "")]
    if config.get("recorded"):
        out.insert(0, '<span class="ss-badge">recorded run</span>')
    out += [f'<span class="ss-badge ss-badge-fault" data-fault="{esc(n)}">fault: {esc(fault_label(n))}</span>'
            for n in config.get("faults") or []]
    return '<div class="ss-badges">' + "".join(out) + "</div>"
