"""Bug or numerics? The verdict on where a decoder's output first leaves the cloud-only reference:
`numerics` (a near-tie flipped by this dtype's arithmetic) or `decoder` (a bug, with the error
finding that explains it); docs/recorder.md, "Bug or numerics?"."""
from __future__ import annotations

from specdec_core.findings import REGISTRY, finding

# How far beyond the probed width-1 vs width-(k+1) difference a flip is still put down to
# numerics: the probe sees a few positions only, and a flip needs the two forwards to move the
# two tokens' logits in opposite directions (up to twice the per-logit difference).
PROBE_FACTOR = 4.0
MIN_TOLERANCE = 1e-3          # logits: float32 near-exact ties


def common_prefix(a, b) -> int:
    """Length of the common prefix of two sequences (ids, texts): the index of the first
    difference, or the shorter length."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def first_index(user: list[int], ref: list[int]) -> int | None:
    """Index of the first token where the two outputs differ (or where the shorter ends); None
    when they are equal."""
    i = common_prefix(user, ref)
    return None if i == len(user) == len(ref) else i


EPS = {"float32": 2.0 ** -24, "bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}
ULPS = 8      # a few roundings of the row's largest logit, across two forwards


def tolerance(numerics: dict | None, dtype: str | None = None, scale: float | None = None):
    """Largest logit swing a flip may have and still be numerics: the larger of what the probe
    measured on this clip (times PROBE_FACTOR, both logits moving) and a few units in the last
    place of the row's largest logit in this dtype (a sparse probe can see no difference at
    all: bf16 logits move in steps of 1/16 near 10). None when neither is known."""
    cands = []
    if numerics and numerics.get("max_logit_diff") is not None:
        cands.append(PROBE_FACTOR * 2 * float(numerics["max_logit_diff"]))
    dtype = dtype or (numerics or {}).get("dtype")
    if dtype in EPS and scale is not None:
        cands.append(ULPS * EPS[dtype] * abs(float(scale)))
    return round(max(cands + [MIN_TOLERANCE]), 5) if cands else None


def reference_row(logits_row, user_tok: int | None, ref_tok: int | None) -> dict:
    """From the reference forward's logits at the divergent position: its top-1 - top-2 margin
    and how far it put the reference token above the decoder's (`gap`)."""
    import torch

    row = logits_row.float()
    top = torch.topk(row, 2)
    d = {"margin": round(float(top.values[0] - top.values[1]), 5), "gap": None,
         "scale": round(float(row.abs().max()), 3)}
    if user_tok is not None and ref_tok is not None and 0 <= user_tok < row.shape[-1]:
        d["gap"] = round(float(row[ref_tok] - row[user_tok]), 5)
    return d


def verdict(index: int, user: dict | None, reference: dict | None, round_: int | None,
            ref: dict, mine: dict, numerics: dict | None = None,
            findings: list[dict] = (), dtype: str | None = None) -> dict:
    """reference.first_divergence. `ref`: reference_row() + width; `mine`: the decoder's
    forward at that position: {margin, gap (its committed token over the reference token, or
    None when only known to be >= margin), width, argmax (bool: committed token is its argmax),
    same_context (bool), unverified (bool: no cloud forward decided it)}."""
    fd = {"index": index, "user": user, "reference": reference, "round": round_,
          "cause": "decoder", "margin_reference": ref.get("margin"),
          "margin_user": mine.get("margin"), "width_reference": ref.get("width"),
          "width_user": mine.get("width"), "swing": None,
          "tolerance": tolerance(numerics, dtype, ref.get("scale")),
          "explained_by": None, "why": ""}
    # error findings that can explain it: not those whose evidence lies after the divergence
    errors = [f for f in findings if f.get("severity") == "error"
              and not ((f.get("evidence") or {}).get("index") or -1) > index]
    code = lambda *cs: next((f.get("code") for f in errors if f.get("code") in cs), None)  # noqa: E731
    # the roots that put the models on another context (their `context` fact), and a tail no
    # cloud forward verified
    context = tuple(c.code for c in REGISTRY.values() if c.context) + ("unverified_end",)
    stopped = ("the decoder stopped before the reference" if user is None
               else "the decoder went on after the reference stopped")
    for hit, why, codes in (
            (user is None or reference is None, stopped, ("missed_eos", *context)),
            (mine.get("unverified"), "no cloud forward over the committed context decided this token",
             (*context, "lossless_violation")),
            (not mine.get("same_context", True), "the forward the decoder committed from saw a different context",
             context),
            (not mine.get("argmax"), "the committed token is not the argmax of the forward it came from",
             ("lossless_violation", "rank_window_exceeded", "lossy_accept")),
            (code(*context), "an earlier context or position error", context)):
        if hit:
            fd["why"], fd["explained_by"] = why, code(*codes)
            return fd
    gap_user = mine.get("gap")
    gap_user = mine.get("margin") if gap_user is None else gap_user
    if ref.get("gap") is not None and gap_user is not None:
        fd["swing"] = round(float(ref["gap"]) + float(gap_user), 5)
    tol = fd["tolerance"]
    if tol is not None and fd["swing"] is not None and fd["swing"] > tol:
        fd["why"] = (f"the two forwards disagree by {fd['swing']:.4g} logits, more than this "
                     f"dtype's arithmetic moves them here ({tol:.4g})")
        return fd
    fd["cause"] = "numerics"
    fd["why"] = ("same context, the committed token is its own forward's argmax, and the two "
                 "forwards disagree by more than the margin: a near-tie flipped")
    return fd


def numeric_finding(fd: dict, dtype: str | None = None) -> dict:
    """The info finding `numeric_divergence` (never an error)."""
    u, r = fd["user"] or {}, fd["reference"] or {}
    detail = (f"at token {fd['index']} the decoder committed {u.get('text')!r} and the reference "
              f"{r.get('text')!r}: the cloud's top-1 - top-2 margin was {fd['margin_reference']} "
              f"logits in the reference forward (width {fd['width_reference']}) and "
              f"{fd['margin_user']} in the forward the decoder committed from (width "
              f"{fd['width_user']})")
    if fd.get("swing") is not None:
        detail += f"; the two forwards disagree by {fd['swing']} logits there"
    detail += (". From here the texts differ for good; the rest of the run was checked against "
               "the decoder's own forwards.")
    return finding(
        "numeric_divergence", f"output leaves the reference at token {fd['index']} by numerics, not a bug",
        detail, cause=(f"{dtype or 'low-precision'} forwards of different widths (1 new token in "
                      "generate, k+1 in a verify) round differently; a near-tie can flip"),
        fix=("nothing to fix in the decoder; compare in float32 to see token-for-token "
                    "equality, or judge the output against the decoder's own forwards"),
        evidence={"index": fd["index"], "margin_reference": fd["margin_reference"],
                  "margin_user": fd["margin_user"], "width_reference": fd["width_reference"],
                  "width_user": fd["width_user"], "swing": fd.get("swing"),
                  "tolerance": fd.get("tolerance")})


def summary(fd: dict | None) -> str:
    """One line for the CLI: where the output leaves the reference and why."""
    if fd is None:
        return "matches the reference token for token"
    head = f"leaves the reference at token {fd['index']}: {fd['cause']}"
    if fd["cause"] == "numerics":
        return (head + f" (margins {fd['margin_reference']} / {fd['margin_user']} logits, widths "
                f"{fd['width_reference']} / {fd['width_user']}); the texts differ from here on")
    return head + (f" — see {fd['explained_by']}" if fd.get("explained_by") else "") + (
        f" ({fd['why']})" if fd.get("why") else "")
