"""Per-step drill-down of a recording (docs/recorder.md): each step (the edge forwards since the last
cloud forward, and that forward) with caches, ids, positions, mask, and edge vs cloud top-5 per draft."""
from __future__ import annotations

import math
from typing import Callable

from specdec_core.findings import fact

from .formatting import DASH, esc, fmt, pct, stylesheet

INSPECT_CSS = stylesheet("inspect")

Texts = Callable[[int], str]


def split_rounds(recording: dict | None) -> list[list[dict]]:
    """Forwards grouped into rounds: edge forwards up to and including the next cloud forward."""
    groups, cur = [], []
    for f in (recording or {}).get("forwards") or []:
        cur.append(f)
        if f.get("model") == "cloud":
            groups.append(cur)
            cur = []
    if cur:
        groups.append(cur)
    return groups


def round_choices(recording: dict | None) -> list[tuple[str, int]]:
    return [(f"cloud call {n}: {e} edge forward(s) before it" if g[-1].get("model") == "cloud"
             else f"tail {n}: {e} edge forward(s), no cloud call", n)
            for n, g in enumerate(split_rounds(recording), 1) for e in [sum(f.get("model") == "edge" for f in g)]]


def _after(f: dict) -> int | None:
    L = f.get("cache_len")
    if L is None or not f.get("use_cache", True):
        return L
    return L + len(f.get("ids") or [])


def _ids_text(ids, texts: Texts, limit: int = 12) -> str:
    ids = list(ids or [])
    shown = "".join(texts(i) for i in ids[-limit:])
    more = f"… ({len(ids)} ids) " if len(ids) > limit else ""
    return more + shown


def _positions(f: dict) -> str:
    for key in ("position_ids", "cache_position"):
        p = f.get(key)
        if p is not None:
            txt = f"{p[0]}..{p[-1]}" if len(p) > 3 else ",".join(map(str, p))
            L = f.get("cache_len")
            bad = L is not None and p and p[0] != L
            return (f'<span class="{"ss-rd-bad" if bad else ""}">{esc(key)} {esc(txt)}</span>')
    return "implicit"


def _mask(f: dict) -> str:
    m = f.get("mask_shape")
    if not m:
        return "none"
    L, n = f.get("cache_len") or 0, len(f.get("ids") or [])
    bad = L > 0 and m[-1] < L + n
    return f'<span class="{"ss-rd-bad" if bad else ""}">{esc("×".join(map(str, m)))}</span>'


def _cache_summary(group: list[dict], last_after: dict) -> str:
    rows = []
    for model in ("edge", "cloud"):
        fs = [f for f in group if f.get("model") == model]
        if not fs:
            continue
        before, after = fs[0].get("cache_len"), _after(fs[-1])
        prev = last_after.get(fs[0].get("cache"))
        crop = (f' <span class="ss-rd-bad">(cropped from {prev})</span>'
                if prev is not None and before is not None and before < prev else "")
        rows.append(f'<tr><td class="ss-rd-{model}">{model}</td><td>{esc(before)}{crop}</td>'
                    f'<td>{esc(after)}</td><td>{len(fs)}</td></tr>')
    return ("<table><tr><th>model</th><th>cache before</th><th>cache after</th><th>forwards</th></tr>"
            + "".join(rows) + "</table>")


def _forward_table(group: list[dict], texts: Texts) -> str:
    rows = []
    for f in group:
        m = f.get("model")
        last = (f.get("rows") or {}).get("argmax") or []
        rows.append(
            f'<tr><td>{esc(f.get("i"))}</td><td class="ss-rd-{esc(m)}">{esc(m)}</td>'
            f'<td>{esc(f.get("cache_len"))}</td><td class="ss-rd-mono">{esc(_ids_text(f.get("ids"), texts))}</td>'
            f'<td>{_positions(f)}</td><td>{_mask(f)}</td><td>{esc(_after(f))}</td>'
            f'<td>{esc(texts(last[-1])) if last else ""}</td></tr>')
    return ("<table><tr><th>#</th><th>model</th><th>cache before</th><th>fed</th><th>positions</th>"
            "<th>mask</th><th>cache after</th><th>argmax (last row)</th></tr>" + "".join(rows) + "</table>")


def _top(f: dict, r: int, texts: Texts) -> str:
    rows = f["rows"]
    return " ".join(f"{esc(texts(i))}<small>{math.exp(lp):.2f}</small>"
                    for i, lp in zip(rows["top_ids"][r], rows["top_logp"][r]))


def _top5_table(group: list[dict], texts: Texts) -> str:
    """Each drafted token next to the edge row that drafted it and the cloud row that verified it."""
    cloud = next((f for f in group if f.get("model") == "cloud" and f.get("rows")), None)
    if cloud is None:
        return "<p>No cloud forward in this step: nothing was verified.</p>"
    edge_fs = [f for f in group if f.get("model") == "edge" and (f.get("rows") or {}).get("argmax")]
    ids, L = cloud.get("ids") or [], cloud.get("cache_len") or 0
    crow = cloud["rows"]
    off, n_rows = crow.get("offset") or 0, len(crow.get("argmax") or [])
    m = min(len(edge_fs), len(ids))
    rows = []
    for d in range(m):
        j = len(ids) - m + d                 # input index of the d-th drafted token
        r = j - 1 - off                      # cloud row that scored the position before it
        if not 0 <= r < n_rows:
            continue
        ef = edge_fs[len(edge_fs) - m + d]
        er = len(ef["rows"]["argmax"]) - 1
        tok = ids[j]
        rank = crow["next_rank"][r] if r < len(crow.get("next_rank") or []) else None
        cls = "" if tok == crow["argmax"][r] else "ss-rd-bad"
        rows.append(f'<tr><td>{L + j}</td><td class="ss-rd-mono">{esc(texts(tok))}</td>'
                    f'<td>{esc(ef.get("i"))}</td><td>{_top(ef, er, texts)}</td><td>{_top(cloud, r, texts)}</td>'
                    f'<td class="{cls}">{esc(rank) if rank is not None else "–"}</td></tr>')
    if not rows:
        return "<p>The cloud scored none of the drafted tokens in this step.</p>"
    return ("<table><tr><th>cloud position</th><th>drafted</th><th>edge forward</th><th>edge top-5</th>"
            "<th>cloud top-5</th><th>cloud rank of draft</th></tr>" + "".join(rows) + "</table>")


def step_round(recording: dict | None, trace: dict | None, n: int | None) -> int | None:
    """The trace round whose tree drill-down step n's cloud call verified (None: no tree)."""
    groups = split_rounds(recording)
    if not n or not 1 <= int(n) <= len(groups):
        return None
    call = next((f.get("i") for f in groups[int(n) - 1] if f.get("model") == "cloud"), None)
    return next((r.get("round") for r in (trace or {}).get("rounds") or []
                 if (r.get("tree") or {}).get("forward") == call and call is not None), None)


def audio_html(recording: dict | None) -> str:
    """An Omni recording's audio span and mrope delta (`recording["audio"]`); empty for text prompts."""
    a = (recording or {}).get("audio")
    if not isinstance(a, dict):
        return ""
    span, delta = a.get("span"), a.get("rope_delta")
    parts = []
    if isinstance(span, (list, tuple)) and len(span) == 2:
        s, e = span
        parts.append(f"audio at prompt positions {esc(s)}..{esc(e)} "
                     f"({esc(e - s if isinstance(s, int) and isinstance(e, int) else '?')} positions)")
    if delta is not None:
        parts.append(f"rope delta {esc(delta)} (text positions after the audio continue at "
                     f"cache length {'+' if int(delta) >= 0 else '−'} {esc(abs(int(delta)))})")
    return f'<div class="ss-rd-audio" data-audio="1">🔊 {"; ".join(parts)}</div>' if parts else ""


def recording_counts(trace: dict | None, recording: dict | None) -> dict:
    """The Inspect tab's counts, defined here once (status line, drill-down and pooled table read them):
    tokens: generated ids (the stop token included, as metrics["new_tokens"]); rounds: the trace's rounds
    as the recorder rebuilds them from what was committed; checked: those a cloud call checked; calls:
    cloud forwards (the drill-down's steps); unchecked: committed tokens no cloud call checked;
    off_text: the root finding (a `context` fact, or a recording cut short) that says why cloud calls
    checked nothing committed, or None."""
    tr = trace or {}
    toks, rounds = tr.get("tokens") or [], tr.get("rounds") or []
    fwds = (recording or {}).get("forwards") or []
    return {"tokens": (tr.get("metrics") or {}).get("new_tokens", len(toks)),
            "stop": toks[-1].get("text") if toks and tr.get("ended_by") == "eos" else None,
            "rounds": len(rounds), "checked": sum(bool(r.get("verified")) for r in rounds),
            "calls": sum(f.get("model") == "cloud" for f in fwds),
            "unchecked": sum(t.get("source") == "draft" for t in toks),
            "off_text": next((f["code"] for f in tr.get("diagnostics") or [] if not f.get("explained_by")
                              and (fact(f.get("code"), "context") or f.get("code") == "incomplete_recording")), None)}


def _n(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def counts_line(c: dict) -> str:
    """recording_counts as one line that says what each number counts."""
    out = [_n(c["tokens"], "token") + (f" (the last, {c['stop']}, is the stop token)" if c["stop"] else "")]
    if c["checked"] == c["rounds"]:
        out.append(_n(c["rounds"], "round") + (", each checked by a cloud call" if c["rounds"] else ""))
    else:
        out.append(f"{_n(c['rounds'], 'round')} rebuilt from what was committed: {c['checked']} checked by "
                   f"a cloud call, {c['rounds'] - c['checked']} not")
    idle = c["calls"] - c["checked"]
    why = "checked nothing that was committed" + (
        f": they ran on a context that is not the text ({c['off_text'].replace('_', ' ')})"
        if c.get("off_text") else "")
    out.append(_n(c["calls"], "cloud call") + (f" (forwards of the cloud): {c['checked']} checked a round, "
                                               f"{idle} {why}" if idle else ""))
    if c["unchecked"]:
        out.append(f"{_n(c['unchecked'], 'unchecked draft')}: committed with no cloud call checking them"
                   + (" (the cloud was called, on another context)" if idle and c.get("off_text") else ""))
    return " · ".join(out)


def step_note(recording: dict | None, counts: dict | None = None) -> str:
    """How the drill-down's steps (one per cloud call of the loop) relate to the counts."""
    groups = split_rounds(recording)
    tail = " and a tail of edge forwards with no cloud call" if groups and not any(
        f.get("model") == "cloud" for f in groups[-1]) else ""
    return "One step per cloud call" + tail + (". " + counts_line(counts) if counts else ".")


def round_html(recording: dict | None, n: int | None, texts: Texts | None = None,
               counts: dict | None = None) -> str:
    """The drill-down of step n (1-based: the edge forwards up to the loop's n-th cloud call)."""
    groups = split_rounds(recording)
    if not groups:
        return '<div class="ss-rd"><p>No recording loaded.</p></div>'
    n = max(1, min(int(n or 1), len(groups)))
    texts = texts or "#{}".format      # an id without a tokenizer: "#42"
    last_after: dict = {}
    for g in groups[: n - 1]:
        for f in g:
            last_after[f.get("cache")] = _after(f)
    g = groups[n - 1]
    return (f'<div class="ss-rd" data-round="{n}">{audio_html(recording)}'
            f'<div class="ss-rd-note">{esc(step_note(recording, counts))}</div>'
            f'<h4>{_step_title(groups, n)}: caches</h4>'
            f'{_cache_summary(g, last_after)}<h4>Forwards</h4>{_forward_table(g, texts)}'
            f'<h4>Edge vs cloud at each drafted position</h4>{_top5_table(g, texts)}</div>')


def _step_title(groups: list[list[dict]], n: int) -> str:
    calls = sum(any(f.get("model") == "cloud" for f in g) for g in groups)
    if any(f.get("model") == "cloud" for f in groups[n - 1]):
        return f"Cloud call {n} of {calls} (the edge forwards before it, and the call)"
    return f"Tail after cloud call {calls}: edge forwards with no cloud call"


# ---- Pooled view over several recordings ---------------------------------------------------
def pooled_trace(traces: list[dict]) -> dict:
    """A trace-shaped dict of every trace's rounds: the pooled per-position acceptance."""
    return {"rounds": [r for tr in traces for r in (tr or {}).get("rounds") or []]}


def pooled_html(entries: list[dict]) -> str:
    """One row per recording, and the acceptance by draft position pooled beside each one's own."""
    from .plots import position_acceptance

    if not entries:
        return '<div class="ss-pool"><p>Upload two or more recordings to pool them.</p></div>'
    rows = []
    for e in entries:
        tr, fs = e.get("trace") or {}, e.get("findings") or []
        m, c = tr.get("metrics") or {}, recording_counts(tr, e.get("recording"))
        errs = sorted({f["code"] for f in fs if f.get("severity") == "error"})
        warns = sorted({f["code"] for f in fs if f.get("severity") == "warning"})
        codes = (f'<span class="ss-pool-err">{esc(", ".join(errs))}</span>' if errs else
                 '<span class="ss-pool-ok">no error</span>' if e.get("ok", True) else
                 f'<span class="ss-pool-err">the run ended in an error: {esc(e.get("error"))}</span>')
        if warns:
            codes += f' <small>(warning: {esc(", ".join(warns))})</small>'
        acc = m.get("acceptance_rate")
        rows.append(f'<tr data-label="{esc(e.get("label"))}"><td class="ss-pool-name">{esc(e.get("label"))}</td>'
                    f'<td class="ss-num">{c["tokens"]}</td><td class="ss-num">{c["calls"]}</td>'
                    f'<td class="ss-num">{fmt("acceptance_rate", acc)}</td>'
                    f'<td>{codes}</td></tr>')
    pool = pooled_trace([e.get("trace") for e in entries])
    pooled = position_acceptance(pool)
    own = [{p: (r, n) for p, r, n in position_acceptance(e.get("trace") or {})} for e in entries]
    n_rounds = sum(bool(r.get("verified")) for r in pool["rounds"])

    def cell(v):
        return DASH if v is None or not v[1] else f"{pct(v[0])}<small> of {v[1]}</small>"

    pos = "".join(
        f'<tr><td class="ss-num">{p}</td>'
        f'<td><span class="ss-pool-bar" style="width:{round(100 * r)}px"></span><b>{pct(r)}</b>'
        f'<small> of {n}</small></td>'
        + "".join(f'<td class="ss-num">{cell(o.get(p))}</td>' for o in own) + '</tr>'
        for p, r, n in pooled)
    heads = "".join(f'<th>{esc(e.get("label"))}</th>' for e in entries)
    return ('<div class="ss-pool" data-pooled="' + str(len(entries)) + '">'
            f'<div class="ss-pool-sum">{len(entries)} recordings, {n_rounds} verified rounds pooled</div>'
            '<table><tr><th>recording</th><th>tokens</th><th>cloud calls</th><th>acceptance</th>'
            '<th>findings</th></tr>' + "".join(rows) + '</table>'
            '<h4>Acceptance by draft position, pooled (and per recording)</h4>'
            + ('<table class="ss-pool-pos"><tr><th>position</th><th>pooled</th>' + heads + '</tr>'
               + pos + '</table>' if pooled else
               '<p>No verified rounds in these recordings.</p>') + '</div>')


def pooled_findings_html(pooled: list[dict] | None, n: int) -> str:
    """The pooled findings (checks over several runs) as cards; a plain line when there are none."""
    from .findings import findings_html

    if pooled:
        return findings_html(pooled)
    if n < 2:
        return '<div class="ss-findings"><div class="ss-none">Pooled checks need two or more recordings.</div></div>'
    return ('<div class="ss-findings"><div class="ss-none" data-pooled-clean="1">No pooled finding over '
            f'{n} recordings (pooled today: the sampled-draft temperature check).</div></div>')


# What `python -m specdec_core record FILE.py:FUNCTION` calls (recorder/driver/clip.record_clip): the
# signature, and a whole greedy loop in ten lines that it records (docs/recorder.md).
RECORD_SIGNATURE = ("def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(), "
                    "**kw) -> list[int]")
RECORD_EXAMPLE = '''\
@torch.no_grad()       # import torch; no cache: each forward sees the whole sequence
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
    seq, n = input_ids[0].tolist(), input_ids.shape[1]
    while len(seq) - n < max_new_tokens and not set(seq[n:]) & set(stop_ids):
        draft = []
        for _ in range(k):                                   # the edge drafts k tokens
            draft.append(int(edge(torch.tensor([seq + draft])).logits[0, -1].argmax()))
        best = cloud(torch.tensor([seq + draft])).logits[0, len(seq) - 1:].argmax(-1).tolist()
        a = next((i for i, (d, b) in enumerate(zip(draft, best)) if d != b), k)
        seq += draft[:a] + [best[a]]                         # accepted drafts + the cloud's token
    out = seq[n:n + max_new_tokens]
    return next((out[:i + 1] for i, t in enumerate(out) if t in stop_ids), out)'''
RECORDER_DOC = "gradio_api/file=docs/recorder.md"      # served by the app (ui/page.launch_kwargs)


def record_help_html() -> str:
    """The own-decoder help: the signature `record` calls, a loop it records, the command, the guide."""
    return ('<div class="ss-record-help" id="inspect-record-help">'
            '<div>Your decoding function is called as <code class="ss-sig">' + esc(RECORD_SIGNATURE) + '</code>: '
            'the two models, their tokenizer, the prompt as a [1, n] id tensor; it returns the new token '
            'ids (the prompt left out). A parameter named <code>temperature</code>, <code>model_inputs</code>, '
            '<code>seed</code> or <code>drafter</code> is passed when it exists.</div>'
            '<details><summary>a whole loop it records (greedy, ten lines in the function)</summary><pre class="ss-example">'
            + esc(RECORD_EXAMPLE) + '</pre></details>'
            '<div>It re-runs the whole sequence each forward, so <code>record</code> warns '
            '<code>recomputed_context</code>; <code>examples/decoders/correct.py</code> is the same loop with '
            'caches. Record yours: <code>.venv/bin/python -m specdec_core record my_loop.py:decode sample_audio/sad_01.wav '
            '--out rec.json</code>, then upload <code>rec.json</code> here. The guide: '
            f'<a href="{RECORDER_DOC}" target="_blank" rel="noopener" data-doc="docs/recorder.md">'
            'docs/recorder.md</a> (in this repository).</div></div>')
