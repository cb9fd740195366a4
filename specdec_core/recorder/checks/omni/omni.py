"""Checks for what Qwen-style models make normal: 3-row mrope positions with a rope delta
(recorder/observe/mrope.py records them) and heads wider than the tokenizer."""
from __future__ import annotations

from specdec_core.findings import finding
from specdec_core.recorder.checks.registry import check, ev


@check("position_error", scope="row", order=20)
def check_mrope(e) -> list[dict]:
    """position_error when a forward's mrope positions are not the prompt's get_rope_index
    positions / cache_len + rope_delta on all three rows (text rows: checks.check_positions)."""
    t, rec = e.t, e.rec
    layout = rec.get("mrope")
    if not layout:
        return []
    P, d, bad = layout["prompt"], layout["rope_delta"], []
    for f in t.fwds:
        raw = f.raw
        rows = raw.get("mrope") or ([raw["position_ids"]] * 3 if raw.get("position_ids") else None)
        if not rows or not rows[0]:
            continue
        want = [[P[r][j] if j < len(P[r]) else j + d for j in range(f.L, f.L + len(rows[0]))] for r in range(3)]
        if rows != want:
            bad.append((f, rows, want))
    if not bad:
        return []
    f, got, want = bad[0]
    n = len(got[0])
    plain = [list(range(f.L, f.L + n))] * 3
    if f.L and got[0][0] in (0, d):
        cause = (f"positions restarted at {got[0][0]} instead of continuing the cache: computed from "
                 "the new tokens alone (arange(n), or a new-tokens-only attention mask)")
    elif d and got == plain:
        cause = (f"the rope delta ({d}) was dropped: positions continue the cache length but not "
                 "cache_len + rope_delta, so the text after the audio/vision prompt is misplaced")
    elif f.L == 0:
        cause = "the prompt's positions are not the thinker's own get_rope_index positions"
    else:
        cause = "positions do not continue cache_len + rope_delta (a stale or foreign delta/offset)"
    show = lambda r: f"{r[:4]}{'...' if len(r) > 4 else ''}"  # noqa: E731
    return [finding(
        "position_error", f"mrope positions do not continue cache_len + rope_delta in {len(bad)} forward(s)",
        f"{f.model} forward {f.i}: cache held {f.L} positions, rope delta {d}; position_ids rows "
        f"{', '.join(show(r) for r in got)} instead of {', '.join(show(r) for r in want)}",
        cause,
        "pass position_ids = cache_len + arange(n) + rope_delta on all three rows after the "
        "prefill (the prompt's own from get_rope_index, which also gives the delta)",
        ev(f, f.L, got[0][:8], key="mrope position_ids", rope_delta=d, expected=want[0][:8],
            n_forwards=len(bad)))]


@check("vocab_mismatch", "vocab_widths", order=110)
def check_vocab(e) -> list[dict]:
    """Heads wider than the tokenizer are normal (every Qwen pair: 151,936 / 152,064 rows for
    ~151,665 ids), and so are an edge and a cloud head of different widths as long as the loop
    compares them on the shared part. An error only for what shows a bug in the output: an id
    only the wider head has (logits of different widths compared without slicing), or an id
    outside the tokenizer (picked from padding rows)."""
    t, rec = e.t, e.rec
    widths = {m: sorted({f.rows["vocab"] for f in t.fwds if f.model == m and f.rows and f.rows["vocab"]})
              for m in ("edge", "cloud")}
    tok_n = (rec.get("vocab") or {}).get("tokenizer")
    e, c = widths["edge"], widths["cloud"]
    every = e + c
    if not every:
        return []
    shared = min(every)
    differ = len(set(every)) > 1
    past_shared = [x for x in t.out if differ and x >= shared]
    past_tok = [x for x in t.out if tok_n and x >= tok_n]
    named = lambda bad: ev(None, None, bad[:5], widths=widths, tokenizer=tok_n,  # noqa: E731
                         index=t.out.index(bad[0]) if bad else None)
    if past_shared:
        wide = "cloud" if c and max(c) > shared else "edge"
        return [finding(
            "vocab_mismatch", f"logits of different widths were compared: output id {past_shared[0]} exists only in "
            f"the {wide}'s head",
            f"edge head {e}, cloud head {c}, tokenizer {tok_n}; {len(past_shared)} output id(s) "
            f"at or past the shared width {shared} (first at index {t.out.index(past_shared[0])})",
            "the two heads were compared or picked from at their full widths (e.g. Qwen2.5-Omni 3B "
            "151,936 vs 7B 152,064 rows) instead of on the vocabulary both share; ids past it mean "
            "nothing to the other model",
            f"slice both models' logits to the shared vocabulary, logits[..., :{shared}] (or "
            "[..., :len(tokenizer)]) before comparing or picking", named(past_shared))]
    if past_tok:
        return [finding(
            "vocab_mismatch", f"output id {past_tok[0]} is outside the tokenizer ({tok_n} ids)",
            f"edge head {e}, cloud head {c}, tokenizer {tok_n}; {len(past_tok)} output id(s) past "
            f"the tokenizer (first at index {t.out.index(past_tok[0])}); they decode to nothing",
            "an id that is no token: picked from a head's padding rows (the rows past the "
            "tokenizer, e.g. sampling or an argmax over the full head), or made up by the loop "
            "(a marker or pad id such as len(tokenizer) / vocab_size)",
            "pick only among real tokens, logits[..., :len(tokenizer)], and return only ids the "
            "models chose", named(past_tok))]
    if differ or (tok_n and shared != tok_n):
        return [finding(
            "vocab_widths", f"head widths: edge {e}, cloud {c}, tokenizer {tok_n}",
            "heads wider than the tokenizer (or than each other) are normal for Qwen pairs; every "
            "output id is inside the tokenizer and the shared vocabulary",
            "", "compare the two models on the shared vocabulary, logits[..., :min(widths)]",
            ev(widths=widths, tokenizer=tok_n))]
    return []


@check("audio_missing", scope="row", order=30)
def check_audio(e) -> list[dict]:
    """A model that wrote the prompt's audio span into its cache from plain ids (no
    input_features, no inputs_embeds) never heard the clip: the <|AUDIO|> placeholders were
    embedded as ordinary tokens. Lossless still (the cloud verifies), but the drafts are deaf."""
    span = (e.rec.get("audio") or {}).get("span")
    if not span:
        return []
    deaf = [f for f in e.t.fwds if f.raw.get("ids") and not f.raw.get("input_features")
            and not f.raw.get("inputs_embeds") and f.L <= span[0] < f.L + f.n]
    if not deaf:
        return []
    f = deaf[0]
    return [finding(
        "audio_missing", f"the {f.model} never heard the audio",
        f"{f.model} forward {f.i} fed the audio span {span[0]}..{span[1]} as plain <|AUDIO|> ids, "
        "without input_features (or audio embeddings)",
        "the audio features were not passed with the forward that first fed the audio tokens "
        "(e.g. assisted generation does not hand input_features to the assistant)",
        "pass input_features and feature_attention_mask with the prefill of both models",
        ev(f, span[0], None, span=span), severity="warning" if f.model == "edge" else "error")]
