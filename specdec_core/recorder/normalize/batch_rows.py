"""Batch rows (docs/recorder.md, "Batches"): a recording whose forwards ran batch > 1 becomes one
single-row recording per row (padding, per-row cache length and positions, moved slots and rows
followed), each judged by every check; the clip's row is the one whose prompt is the clip's.
Where the layout cannot be read the answer is one finding saying so, never a row-0 verdict."""
from __future__ import annotations

import copy

from specdec_core.analysis.divergence import common_prefix

DROP = ("batch_rows", "batch_layout", "mrope", "mask_rows", "slot_moves")


def batched(rec: dict) -> bool:
    return any((f.get("batch") or 1) > 1 for f in rec.get("forwards") or [])


def _row_forward(f: dict, b: int) -> dict:
    r = f["batch_rows"][b]
    L = f.get("cache_len")
    Lb = None if L is None else L - r["pad"]
    out = {k: v for k, v in f.items() if k not in DROP}
    out.update(ids=r["ids"], position_ids=r.get("position_ids"), cache_position=None, batch=1,
               cache_len=Lb, mask_shape=[1, (Lb or 0) + len(r["ids"])], rows=r.get("rows"),
               batch_row=b, **{k: r[k] for k in ("tape_src", "zeroed") if r.get(k) is not None})
    return out


def _origin(fwds: list) -> None:
    """Positions = cache length + i + c with one constant c per row (left padding counted, as
    rotary positions allow): subtract c. A c that changes is left for the position check."""
    offs = {p[0] - (f.get("cache_len") or 0) for f in fwds if (p := f.get("position_ids"))}
    if len(offs) == 1 and (c := offs.pop()) != 0:
        for f in fwds:
            if f.get("position_ids"):
                f["position_ids"] = [x - c for x in f["position_ids"]]
                f["position_origin"] = c


def split(rec: dict, ctx) -> tuple[list, dict | None]:
    """recording -> ([(row, clip?, row recording)], None); no rows: ([], {"batch": B, "unread":
    why}), which the report says (report.finish: `batch_layout`; no recording to check)."""
    fw = rec.get("forwards") or []
    B = max((f.get("batch") or 1) for f in fw)
    bad = next((f for f in fw if (f.get("batch") or 1) > 1 and (f.get("batch_rows") is None
                                                                 or len(f["batch_rows"]) != B)), None)
    if bad is not None:
        return [], {"batch": B, "unread": f"forward {bad['i']} ({bad['model']}): "
                    + (bad.get("batch_layout") or f"batch {bad.get('batch')}, not {B}")}
    per_row = [[] for _ in range(B)]
    for f, who in _identities([f for f in fw if (f.get("batch") or 1) > 1], B):
        for b, r in enumerate(who):
            per_row[r].append(_row_forward(f, b))
    prompts = [next((f["ids"] for f in rows if not f.get("cache_len")), None) for rows in per_row]
    P = list(rec.get("prompt_ids") or [])
    clip = [b for b, p in enumerate(prompts) if p is not None and P and p[:len(P)] == P]
    if len(clip) != 1:
        return [], {"batch": B, "unread": f"the clip's prompt ({len(P)} ids) is the prompt of "
                                          f"{len(clip)} of the {B} rows"}
    out = []
    sampled = bool((rec.get("declared") or {}).get("temperature"))
    for b, rows in enumerate(per_row):
        if sampled and b != clip[0]:
            continue                   # a sampled row's output cannot be inferred: not judged
        _origin([f for f in rows if f["model"] == "edge"])
        _origin([f for f in rows if f["model"] == "cloud"])
        if b == clip[0]:
            unbatched = [f for f in fw if (f.get("batch") or 1) <= 1]
            rows = sorted(rows + unbatched, key=lambda f: f["i"])
            r = dict(copy.copy(rec), forwards=rows, batch_row=b, batch_size=B)
        else:
            r = dict(copy.copy(rec), forwards=rows, prompt_ids=prompts[b][:_prompt_len(rows, prompts[b])],
                     batch_row=b, batch_size=B, error=None)
            r["out_ids"] = infer_out(r, ctx)
        out.append((b, b == clip[0], _trim(r, ctx)))
    return out, None


def _identities(fw: list, B: int) -> list:
    """[(forward, the row each slot holds)]: rows followed by their content, not their slot (an
    engine condensing its batch moves rows between steps): a slot's row is the one whose keys
    it now holds (`from`, per cache, batch_hooks.py), or in a prefill the row whose prompt it is
    fed; rows are numbered by the first prefill's slots."""
    live, prompts, out = {}, None, []
    for f in fw:
        rows = f["batch_rows"]
        if not f.get("cache_len"):
            ids = [r["ids"] for r in rows]
            prompts = prompts or ids
            who = [next((p for p, q in enumerate(prompts) if x[:len(q)] == q), b) for b, x in enumerate(ids)]
            who = who if sorted(who) == list(range(B)) else list(range(B))
        else:
            was = live.get(f.get("cache"), list(range(B)))
            who = [was[r.get("from", b)] for b, r in enumerate(rows)]
        live[f.get("cache")] = who
        out.append((f, who))
    return out


def _prompt_len(rows: list, prompt: list) -> int:
    """A row's prompt: its first forward's ids, less what its cloud had scored already (a cloud
    prefill that also verifies drafts): the shortest first feed of either model."""
    firsts = [len(f["ids"]) for m in ("edge", "cloud")
              for f in [next((x for x in rows if x["model"] == m and not x.get("cache_len")), None)] if f]
    return min(firsts or [len(prompt)])


def infer_out(r: dict, ctx) -> list[int]:
    """A row whose output the loop did not return: what its cloud chose, greedily, in the
    contexts it was fed (each verify extends the committed ids while its context agrees)."""
    stops = set(r.get("stop_ids") or [])
    limit = (r.get("declared") or {}).get("max_new_tokens") or 10 ** 6
    C, P = list(r["prompt_ids"]), len(r["prompt_ids"])
    for f in ctx.replay(r["forwards"]):
        if f.model != "cloud" or not f.rows or f.ctx is None:
            continue
        q = len(C) - 1
        while f.row_at(q) is not None and common_prefix(f.ctx, C) >= q + 1:
            C.append(f.rows["argmax"][f.row_at(q)])
            if C[-1] in stops or len(C) - P >= limit:
                return C[P:]
            q += 1
    return C[P:]


def _trim(r: dict, ctx) -> dict:
    """Forwards a row ran after the cloud decided its last token (the batch ran on for the other
    rows) are not the row's decode."""
    C = list(r["prompt_ids"]) + list(r["out_ids"])
    stops = set(r.get("stop_ids") or [])
    if not r["out_ids"] or r["out_ids"][-1] not in stops:
        return r
    q = len(C) - 2         # the row that decided the last token (tape.decide's rule): q + 1 >= P
    at = next((f.i for f in ctx.replay(r["forwards"]) if f.model == "cloud" and f.rows
               and f.row_at(q) is not None and common_prefix(f.ctx, C) >= q + 1), None)
    if at is None:
        return r
    return dict(r, forwards=[f for f in r["forwards"] if f["i"] <= at])


def name_row(f: dict, b: int, B: int, clip: bool) -> dict:
    """The finding, its title led by its row ("row 1 of 3 (the clip's): ...")."""
    f = copy.copy(f)
    f["title"] = f"row {b} of {B}{' (the clip)' if clip else ''}: {f['title']}"
    f["evidence"] = dict(f.get("evidence") or {}, row=b, batch=B)
    return f
