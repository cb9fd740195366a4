"""Root cause first: findings whose evidence another finding explains get `explained_by`
(docs/findings.md, "Root cause first"). Which code is a root, and what it explains, is registered
with the code (specdec_core/findings.py: `root`, `explains`)."""
from __future__ import annotations

from specdec_core.findings import roots

# (dropped_output explains nothing: dropped.repair removed its echoes, what the other checks
# find on the repaired text is another bug.)


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
    for root in roots():
        r = by.get(root.code)
        if r is None or r["explained_by"] or r["severity"] == "info":
            continue
        for code in root.explains:     # a warning explains warnings only, never an error
            f = by.get(code)
            if f is not None and f is not r and not f["explained_by"] and (
                    r["severity"] == "error" or f["severity"] != "error"):
                f["explained_by"] = root.code
    return found
