"""Text symptoms of an exact loop are the model's, not the decoder's (issue 36, item 4;
docs/recorder.md, "Text symptoms of an exact loop")."""
from __future__ import annotations

from specdec_core.findings import SEVERITIES, fact, finding

MODEL_CAUSE = ("the cloud alone does this too: the loop is exact ({why}), so this text is what "
               "the model produces on this prompt, not a decoder bug")
ALONE_CAUSE = ("only the text shows this: no forward the models were fed contradicts the committed "
               "text and no check found the output leaving the cloud's, so it is not shown to be a "
               "decoder bug (the model may write this itself); had it come from the decoder: {was}")
MODEL_FIX = ("look at the model or the prompt (chat template, stop ids, temperature, prompt "
             "type); compare with `run --baseline` (cloud only)")


def exact_because(recording: dict, reference: dict | None) -> str | None:
    """Why the loop's output is the cloud's own (a short reason), or None when it is not shown
    (asked where no error but a text symptom was found)."""
    declared = recording.get("declared") or {}
    if declared.get("temperature") and declared.get("verify") == "sampling":
        return "sampling: no check found the samples off the cloud's distribution"
    if reference is not None and reference.get("matches"):
        return "greedy: identical to the cloud's own greedy decode"
    return None


def model_or_decoder(f: dict, recording: dict, reference: dict | None,
                     findings: list[dict]) -> dict:
    """`f` as it is, or, for a text finding of an exact loop (the cloud alone does this too) or with
    nothing under it (no other error, no divergence), the same finding as a warning: a text symptom
    alone is never an error."""
    if not fact(f["code"], "text") or f["severity"] != "error":
        return f
    # forward-level evidence under a text symptom (docs/findings.md, "An error needs proof"):
    # another error (a root it may be the symptom of), or the output leaving the reference
    if any(g["severity"] == "error" and not fact(g["code"], "text") for g in findings):
        return f
    why, fd = exact_because(recording, reference), (reference or {}).get("first_divergence") or {}
    if why is None and reference is not None and fd.get("cause") != "numerics":   # (it diverged)
        return f
    ev = dict(f.get("evidence") or {}, model_or_decoder="model" if why else "text only",
              decoder_error=f["cause"])
    title, cause = ((f"{f['title']} (text only)", ALONE_CAUSE.format(was=f["cause"])) if why is None
                    else (f"{f['title']} (the cloud alone does this too)", MODEL_CAUSE.format(why=why)))
    return finding(f["code"], title, f["detail"], cause, MODEL_FIX, ev, severity="warning",
                   explained_by=f.get("explained_by"))


def judge_text(findings: list[dict], recording: dict, reference: dict | None = None) -> list[dict]:
    """Every finding through model_or_decoder, errors first as before."""
    out = [model_or_decoder(f, recording, reference, findings) for f in findings]
    return sorted(out, key=lambda f: SEVERITIES.index(f["severity"]))
