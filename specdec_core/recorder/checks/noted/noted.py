"""Findings from the normalizers' notes: an edge with its own tokenizer (`edge_tokenizer`, and
`audio_missing` where its re-tokenized prompt lost the cloud's special tokens:
normalize/retokenized.py), and returned ids that are not the text the models were fed
(`dropped_output`: normalize/dropped.py)."""
from __future__ import annotations

from specdec_core.findings import finding
from specdec_core.recorder.checks.registry import check


@check("edge_tokenizer", "audio_missing", scope="row", order=0.1)
def edge_tokenizer(e) -> list[dict]:
    n = e.notes.get("retokenized")
    if n is None:
        return []
    out = [] if n["same_tokenizer"] else [finding(
        "edge_tokenizer", f"the edge drafts in its own vocabulary ({n['edge_width']} ids, the cloud "
        f"{n['cloud_width']}): its forwards were mapped to the cloud's ids through text",
        "the edge's contexts decode to the committed text; its drafts are compared with the "
        "cloud's through their text", "a drafter with its own tokenizer (universal assisted "
        "generation): the text is re-tokenized for it every round", "nothing to fix",
        evidence={"edge_width": n["edge_width"], "cloud_width": n["cloud_width"],
                  "source": n["source"]})]
    lost, markers = n["lost"], n["markers"]
    if lost:
        out.append(finding(
            "audio_missing", f"the edge's re-tokenized prompt lost {len(lost)} special "
            f"token(s) of the cloud's prompt ({', '.join(lost[:4])}{'…' if len(lost) > 4 else ''})",
            "the edge never heard the prosody/audio tokens (" + ", ".join(lost[:8])
            + (")" if not markers else f") nor the chat template markers ({', '.join(markers)})")
            + ": they are in the cloud's prompt and in no edge forward's context",
            "the prompt was decoded to text with skip_special_tokens=True and re-tokenized for the "
            "edge (transformers' universal assisted generation does this" + (
                ", here with the cloud's own tokenizer passed as the assistant's: heads of "
                "different widths take that path" if n["same_tokenizer"] else "")
            + "): the edge drafts without hearing the clip; lossless, fewer drafts accepted at "
            "audio-dependent words",
            "give the edge the condition as text it can read, or an edge tokenizer that knows "
            "these tokens and a conversion that keeps them",
            evidence={"model": "edge", "lost": lost[:16], "n_lost": len(lost),
                      "markers_lost": markers}, severity="warning"))
    return out


@check("dropped_output", scope="row", order=0.2)
def dropped(e) -> list[dict]:
    n = e.notes.get("dropped")
    if n is None:
        return []
    edits, P, gen, fixed = n["edits"], n["P"], e.rec["returned_ids"], e.rec["out_ids"]
    e0 = edits[0]
    drops = [e for e in edits if e["kind"] == "dropped"]
    adds = [e for e in edits if e["kind"] == "added"]
    parts = ([f"{sum(len(e['ids']) for e in drops)} committed id(s) both models were fed are "
              f"missing from the returned ids (at output index {', '.join(str(e['index']) for e in drops)}: "
              f"ids {[e['ids'] for e in drops]})"] if drops else []) + (
        [f"{sum(len(e['ids']) for e in adds)} returned id(s) no model was fed (at index "
         f"{', '.join(str(e['index']) for e in adds)}: ids {[e['ids'] for e in adds]})"] if adds else [])
    first = "at the start" if e0["index"] == 0 else f"at index {e0['index']}"
    return [finding(
        "dropped_output", f"the returned ids are not the text the models were fed ({first})",
        "; ".join(parts) + ". The other checks read the text the models were fed.",
        ("the value returned starts late or skips ids: e.g. slicing the output from "
         "n_prompt + 1, or losing the correction/bonus when the round's tokens are joined"
         if drops else "ids are added to the returned output that no model ever saw "
         "(a marker or a token appended twice after decoding)"),
        "return exactly the committed ids the models were fed after the prompt (seq[n_prompt:])",
        {"model": None, "forward": None, "position": P + e0["index"], "tokens": e0["ids"],
         "edits": edits, "returned_len": len(gen), "fed_len": len(fixed)})]
