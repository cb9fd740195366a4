"""`not_judged`: what the recorder could not see, said with its count instead of silence
(issue 41). `not_judged(what, count, ...)` builds the plain ones; `check_unseen` is this
module's own check: cloud forwards without logits and an output no cloud forward was seen to
verify (docs/recorder.md, "Pipeline")."""
from __future__ import annotations

from specdec_core.findings import finding
from specdec_core.recorder.checks.registry import check


def not_judged(what: str, count: int, total: int | None = None, why: str = "", fix: str = "",
               severity: str = "info", **evidence):
    """One finding: `count` (of `total`) `what` (a plural noun phrase: "cloud forwards",
    "tree drafts") were not judged, `why` says what was missing."""
    of = f" of {total}" if total is not None else ""
    return finding("not_judged", f"{count}{of} {what} not judged", why,
                   "the recording lacks what the check needs for these", fix,
                   evidence={"what": what, "count": count, "total": total, **evidence},
                   severity=severity)


@check("not_judged", order=170)
def check_unseen(e) -> list:
    rec = e.rec
    fw = rec.get("forwards") or []
    cloud = [f for f in fw if f.get("model") == "cloud"]
    out = []
    if not cloud and rec.get("out_ids") and any(f.get("model") == "edge" for f in fw):
        out.append(not_judged(
            "output tokens", len(rec["out_ids"]), None,
            "no forward of the cloud was seen (not its top-level forward, not its inner model "
            "followed by its LM head): nothing it verified could be checked",
            "hand the Recorder the model object the loop calls as its verifier",
            severity="warning", cloud_forwards=0))
    blind = [f["i"] for f in cloud if f.get("ids") and not f.get("rows")]
    if blind:
        out.append(not_judged(
            "cloud forwards", len(blind), len(cloud),
            "these forwards gave no logits the recorder could read (an inner model whose hidden "
            "states never went through the LM head, or an output without logits): their rows "
            "are not checked", "hand the Recorder the model whose forward or LM head makes the "
            "verifier's logits", severity="warning" if len(blind) == len(cloud) else "info",
            forwards=blind[:20]))
    lost = [f["i"] for f in fw if f.get("module") == "head" and not f.get("ids")
            and "tree_sel" not in f]      # (tree drafting forwards are read through the tree)
    if lost:
        out.append(not_judged(
            "head forwards", len(lost), sum(f.get("module") == "head" for f in fw),
            "the tokens fed to the head could not be read (neither ids nor the cloud's input "
            "embeddings of ids): their drafts and features are not checked", "", forwards=lost[:20]))
    return out
