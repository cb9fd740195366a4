"""Text symptoms of an exact loop are the model's, not the decoder's (issue 36, item 4;
docs/recorder.md, "Text symptoms of an exact loop")."""
from __future__ import annotations

from specdec_core.findings import fact, finding

MODEL_CAUSE = ("the cloud alone does this too: the loop is exact ({why}), so this text is what "
               "the model produces on this prompt, not a decoder bug")
MODEL_FIX = ("look at the model or the prompt (chat template, stop ids, temperature, prompt "
             "type); compare with `run --baseline` (cloud only)")


def exact_because(recording: dict, reference: dict | None, findings: list[dict]) -> str | None:
    """Why the loop's output is the cloud's own (a short reason), or None when it is not shown."""
    if any(f["severity"] == "error" and not fact(f["code"], "text") for f in findings):
        return None
    declared = recording.get("declared") or {}
    if declared.get("temperature") and declared.get("verify") == "sampling":
        return "sampling: no check found the samples off the cloud's distribution"
    if reference is not None and reference.get("matches"):
        return "greedy: identical to the cloud's own greedy decode"
    return None


def model_or_decoder(f: dict, recording: dict, reference: dict | None,
                     findings: list[dict]) -> dict:
    """`f` as it is, or, for a text finding of an exact loop, the same finding as a warning whose
    cause says the cloud alone does this too."""
    if not fact(f["code"], "text") or f["severity"] != "error":
        return f
    why = exact_because(recording, reference, findings)
    if why is None:
        return f
    ev = dict(f.get("evidence") or {}, model_or_decoder="model", decoder_error=f["cause"])
    return finding(f["code"], f"{f['title']} (the cloud alone does this too)", f["detail"],
                   MODEL_CAUSE.format(why=why), MODEL_FIX, ev, severity="warning",
                   explained_by=f.get("explained_by"))


def judge_text(findings: list[dict], recording: dict, reference: dict | None = None) -> list[dict]:
    """Every finding through model_or_decoder, errors first as before."""
    out = [model_or_decoder(f, recording, reference, findings) for f in findings]
    rank = {"error": 0, "warning": 1, "info": 2, "ok": 3}
    return sorted(out, key=lambda f: rank.get(f["severity"], 9))
