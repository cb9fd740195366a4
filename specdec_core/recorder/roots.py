"""Root cause first: findings whose evidence another finding explains get `explained_by`
(docs/findings.md, "Root cause first")."""
from __future__ import annotations

_TEXT = ("doubling", "cycle", "punct_flood", "template_leak", "length", "no_stop",
         "acceptance_collapse", "edge_mishears")
_CONTEXT = ("context_mismatch", "hidden_draft_processing", "unverified_end", "missed_eos",
            "lossless_violation", "rank_window_exceeded", "acceptance_rule", "residual_mismatch",
            "off_by_one", "draft_schedule", "sibling_resampled", "sibling_distribution") + _TEXT

# (dropped_output explains nothing: dropped.repair removed its echoes, what the other checks
# find on the repaired text is another bug.)
# root -> the codes its evidence explains, most fundamental root first (a root explained by an
# earlier one passes nothing on: its symptoms go to the earlier root)
EXPLAINS: dict[str, tuple] = {
    "vocab_mismatch": _CONTEXT,
    "tree_positions": ("position_error", "tree_mask") + _CONTEXT,
    "tree_mask": ("position_error",) + _CONTEXT,
    "position_error": _CONTEXT,
    "stale_cache": _CONTEXT,
    "context_mismatch": _CONTEXT[1:],
    "off_by_one": ("lossless_violation", "unverified_end") + _TEXT,
    "missed_eos": _TEXT,
    "unverified_end": _TEXT,
    "lossless_violation": _TEXT,
    "rank_window_exceeded": _TEXT,
    "acceptance_rule": ("residual_mismatch",) + _TEXT,
    "residual_mismatch": _TEXT,
    "sibling_resampled": ("sibling_distribution",) + _TEXT,
    "greedy_draft_sampling": ("hidden_draft_processing",) + _TEXT,
    "stale_features": ("acceptance_collapse",),      # a warning root: lossless, acceptance drops
    "audio_missing": ("edge_mishears",),
    "hidden_draft_processing": ("punct_flood", "acceptance_collapse", "cycle", "doubling", "edge_mishears"),
}


def merge_repeats(found: list) -> list:
    """One finding per code: a second finding of a code (positions and mask of one position
    bug) joins the first one's detail."""
    first, out = {}, []
    for f in found:
        if f["code"] in first:
            g = first[f["code"]]
            g["detail"] = f"{g['detail']}; also: {f['title']}: {f['detail']}"
            g["evidence"] = {**f["evidence"], **{k: v for k, v in g["evidence"].items() if v is not None}}
        else:
            first[f["code"]] = f
            out.append(f)
    return out


def link(found: list) -> list:
    """Set explained_by on the symptoms of each root present (a user's choice such as
    lossy_accept is never listed as a symptom). Returns the merged list."""
    found = merge_repeats(found)
    by = {f["code"]: f for f in found}
    for root, symptoms in EXPLAINS.items():
        r = by.get(root)
        if r is None or r["explained_by"] or r["severity"] == "info":
            continue
        for code in symptoms:     # a warning explains warnings only, never an error
            f = by.get(code)
            if f is not None and f is not r and not f["explained_by"] and (
                    r["severity"] == "error" or f["severity"] != "error"):
                f["explained_by"] = root
    return found


def top_level(found: list, severity: str = "error") -> list:
    return [f for f in found if f["severity"] == severity and not f.get("explained_by")]
