"""`zeroed_kv` (issue 48, item 4): a row attends cached slots whose keys are all zero
(observe/batch_hooks.py measures them against the row's attention mask). A rollback that zeroes a
ragged row's rejected tail instead of masking or cropping it leaves phantom slots: each adds e^0
to the softmax denominator, and the row's cache length counts them, so its right positions look
wrong (position_error is its symptom, never the root)."""
from __future__ import annotations

from specdec_core.findings import finding
from specdec_core.recorder.checks.registry import check


@check("zeroed_kv", scope="row", order=0.5)
def zeroed_kv(e) -> list:
    hit = [f for f in e.rec.get("forwards") or [] if f.get("zeroed")]
    if not hit:
        return []
    f0, most = hit[0], max(hit, key=lambda f: len(f["zeroed"]))
    models = sorted({f["model"] for f in hit})
    return [finding(
        "zeroed_kv", f"the cache holds zeroed key/value slots that are still attended: "
        f"{len(hit)} forward(s) ({', '.join(models)}), up to {len(most['zeroed'])} phantom slot(s)",
        f"from forward {f0['i']} ({f0['model']}) on, cached slots {f0['zeroed'][:8]} have keys that "
        "are exactly zero while the attention mask attends them: each scores q.0 = 0 and adds e^0 to "
        "the softmax denominator, diluting the row's attention; the row's cache length counts them, "
        "so its positions (which are right) no longer continue it",
        "a rollback for rows that accepted different numbers of drafts zeroed each row's rejected "
        "key/value tail in a rectangular batch cache instead of masking it (mlx-vlm #1962), or the "
        "mask attends slots the loop filled with zeros (a zero-padded slot shifted into a row)",
        "mask the rejected slots (attention mask 0 for them, as left padding is), or crop the rows "
        "to a uniform accepted count (mlx-vlm #2113); never leave zeroed slots attended",
        {"model": f0["model"], "forward": f0["i"], "slots": f0["zeroed"][:16],
         "forwards": len(hit), "max_slots": len(most["zeroed"])})]
