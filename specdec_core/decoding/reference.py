"""The built-in decoder against the cloud-only reference (`run --baseline`, the Live tab's
"compare with cloud-only"; recorder/driver/reference.compare): the reference decode with its
logits and the bug-or-numerics verdict at the first divergence (analysis/divergence.py), read from
the trace (each verified token keeps its verify row's `cloud_top2` = [top-1 id, top-2 id, margin])."""
from __future__ import annotations

from specdec_core.analysis import divergence
from specdec_core.decoding.baseline import cloud_only


STOP_KNOBS = ("max_new_tokens", "min_new_tokens", "stop_at_first_sentence", "prompt_type")


def reference_for(backend, prompt, cfg):
    """(the cloud-only result, its per-step logits): one reference several traces can share."""
    return cloud_only(backend, prompt, cfg, keep_logits=True)


def same_reference(cfg_a, cfg_b) -> bool:
    """Whether a reference decoded under cfg_a is also cfg_b's (same stops and prompt)."""
    return all(getattr(cfg_a, k) == getattr(cfg_b, k) for k in STOP_KNOBS)


def first_divergence(trace: dict, ref: list[int], ref_logits, tokenizer, numerics=None) -> dict | None:
    """reference.first_divergence for a built-in trace (None when the outputs agree)."""
    def side(i, u, r):
        rec = trace["tokens"][i] if i < len(trace.get("tokens") or []) else None
        return rec and rec.get("round"), _decoder_row(trace, rec, r)
    return diverge(list(trace.get("token_ids") or []), ref, ref_logits, tokenizer,
                   int(trace.get("prompt_len") or 0), side, numerics, trace.get("diagnostics") or [],
                   (trace.get("info") or {}).get("dtype"))


def diverge(user: list[int], ref: list[int], ref_logits, tokenizer, prompt_len: int, side,
            numerics, findings: list, dtype) -> dict | None:
    """Where `user` first leaves the cloud-only `ref` and why (analysis/divergence.verdict; None
    when they agree), for the built-in trace and a recording (`record --reference`) alike:
    `side(i, u, r)` -> (the user's round at i, the user's row: what its cloud said there)."""
    i = divergence.first_index(user, ref)
    if i is None:
        return None
    tok = lambda x: None if x is None else {"id": x, "text": tokenizer.decode([x])}  # noqa: E731
    u = user[i] if i < len(user) else None
    r = ref[i] if i < len(ref) else None
    ref_row = divergence.reference_row(ref_logits[i], u, r) if i < len(ref_logits) else {}
    ref_row["width"] = prompt_len if i == 0 else 1
    rnd, mine = side(i, u, r)
    return divergence.verdict(i, tok(u), tok(r), rnd, ref_row, mine, numerics, findings, dtype=dtype)


def _decoder_row(trace: dict, rec: dict | None, ref_tok) -> dict:
    if rec is None:
        return {}
    t2 = rec.get("cloud_top2")
    rnd = next((x for x in trace.get("rounds") or [] if x.get("round") == rec.get("round")), {})
    if rec.get("source") == "draft" or rec.get("target_rank") is None or not t2:
        return {"unverified": rec.get("source") == "draft", "width": rnd.get("cloud_fed") or None,
                "argmax": rec.get("target_rank") == 1, "margin": None}
    top1, top2, margin = t2
    argmax = rec["id"] == top1 or (margin == 0 and rec["id"] == top2)
    gap = margin if (argmax and ref_tok in (top1, top2) and ref_tok != rec["id"]) else None
    return {"margin": margin, "gap": gap, "width": rnd.get("cloud_fed") or None,
            "argmax": argmax, "same_context": True}
