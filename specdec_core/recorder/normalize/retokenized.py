"""A drafter that sees the text through its own tokenizer (issue 36, universal assisted
generation): every edge forward is rewritten in the cloud's coordinates before the tapes are
built (docs/recorder.md, "Drafters with their own tokenizer")."""
from __future__ import annotations

from bisect import bisect_right
from functools import cache
from itertools import accumulate

from specdec_core.analysis.divergence import common_prefix
from specdec_core.recorder.normalize.replayed import replay
from specdec_core.recorder.observe.edge_vocab import texts_of

CHAT_MARKERS = ("<|im_start|>", "<|im_end|>", "<|endoftext|>")


def _ends(pieces: list[str]) -> list[int]:
    return list(accumulate(map(len, pieces)))


def _cover(ends: list[int], pieces: list[str], m: int) -> int:
    """How many leading positions the first m characters cover (trailing empty pieces, special
    tokens the text does not show, are not counted)."""
    j = bisect_right(ends, m)
    while j and pieces[j - 1] == "":
        j -= 1
    return j


class Frame:
    """The cloud's committed sequence as text, and the edge ids' texts: maps both ways."""

    def __init__(self, rec: dict, tokenizer, et: dict):
        self.tok = tokenizer
        self.etext = {int(k): v for k, v in (et.get("texts") or {}).items()}
        self.especial = {int(k): v for k, v in (et.get("specials") or {}).items()}
        self.C = list(rec.get("prompt_ids") or []) + list(rec.get("out_ids") or [])
        self.cpieces = [self.piece(i) for i in self.C]
        self.cends = _ends(self.cpieces)
        self.text = "".join(self.cpieces)
        self.width = (rec.get("vocab") or {}).get("cloud")
        self.to_cloud = cache(self._to_cloud)        # edge id -> cloud id, once per id

    def piece(self, cid: int) -> str:
        return self.tok.decode([cid], skip_special_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self.tok(text, add_special_tokens=False).input_ids if text else []

    def _to_cloud(self, eid: int) -> int:
        """The cloud id of an edge id's text (its first id), specials by name."""
        if eid in self.especial:
            cid = self.tok.convert_tokens_to_ids(self.especial[eid])
            if isinstance(cid, int) and cid != self.tok.unk_token_id:
                return cid
        ids = self.encode(self.etext.get(eid, ""))
        return ids[0] if ids else (self.tok.unk_token_id or 0)

    def context(self, ectx: list) -> tuple[list[int], list[str], list[int]]:
        """An edge context -> (the cloud ids of its text, their pieces, the edge tokens' ends)."""
        epieces = [self.etext.get(i, "") if i is not None else "" for i in ectx]
        eends = _ends(epieces)
        text = "".join(epieces)
        j = _cover(self.cends, self.cpieces, common_prefix(text, self.text))
        base = self.cends[j - 1] if j else 0
        extra = self.encode(text[base:])
        pieces = self.cpieces[:j] + [self.piece(i) for i in extra]
        return self.C[:j] + extra, pieces, eends


def _rows(rows: dict, f, frame: Frame, tends: list[int], tpieces: list[str], eends: list[int],
          Lc: int) -> dict | None:
    """The edge rows that land on consecutive cloud positions (the last one's run), moved."""
    qs = [_cover(tends, tpieces, eends[q]) - 1 for q in f.row_positions()]
    keep = [len(qs) - 1] if qs and qs[-1] >= Lc else []
    while keep and keep[0] > 0 and qs[keep[0] - 1] == qs[keep[0]] - 1 and qs[keep[0] - 1] >= Lc:
        keep.insert(0, keep[0] - 1)
    if not keep:
        return None
    m = [frame.to_cloud(i) for i in rows["argmax"]]
    out = {**rows, "offset": qs[keep[0]] - Lc, "vocab": frame.width or rows.get("vocab"),
           "argmax": [m[r] for r in keep],
           "top_ids": [[frame.to_cloud(i) for i in rows["top_ids"][r]] for r in keep],
           "next_rank": [rows["next_rank"][r] for r in keep[:-1] if r < len(rows["next_rank"])],
           "next_logp": [rows["next_logp"][r] for r in keep[:-1] if r < len(rows["next_logp"])]}
    for key in ("top_logp", "entropy", "lse_t"):
        if rows.get(key) is not None:
            out[key] = [rows[key][r] for r in keep]
    if rows.get("fed_next"):
        out["fed_next"] = {**rows["fed_next"], "token": frame.to_cloud(rows["fed_next"]["token"])}
    return out


def _forward(raw: dict, f, frame: Frame) -> dict:
    """One edge forward in the cloud's coordinates (its own positions kept as edge_*)."""
    tctx, tpieces, eends = frame.context(f.ctx)
    tends = _ends(tpieces)
    Lc = _cover(tends, tpieces, eends[f.L - 1]) if f.L else 0
    out = {**raw, "ids": tctx[Lc:], "cache_len": Lc if raw.get("cache_len") is not None else None,
           "edge_ids": raw.get("ids"), "edge_cache_len": raw.get("cache_len"),
           "edge_position_ids": raw.get("position_ids"), "position_ids": None,
           "cache_position": None, "mask_shape": None}
    if raw.get("rows"):
        out["rows"] = _rows(raw["rows"], f, frame, tends, tpieces, eends, Lc)
    return out


def _lost(frame: Frame, rec: dict, first_edge) -> list[str]:
    """Special tokens of the cloud's prompt (chat markers aside) the edge's prompt lacks."""
    tok = frame.tok
    plain = set(CHAT_MARKERS) | {t for t in (tok.bos_token, tok.eos_token, tok.pad_token) if t}
    prompt = rec.get("prompt_ids") or []
    cloud = [tok.convert_ids_to_tokens(i) for i, p in zip(prompt, frame.cpieces) if p == ""]
    edge = {frame.especial.get(i) for i in (first_edge.ctx if first_edge else []) if i is not None}
    lost = [t for t in cloud if t not in edge]
    return ([t for t in lost if t not in plain],
            list(dict.fromkeys(t for t in lost if t in CHAT_MARKERS)))


def refed_as_text(rec: dict, tok) -> bool:
    """An edge of the cloud's own tokenizer fed the prompt as text re-tokenized without its
    special tokens (universal assisted generation with one tokenizer passed twice, the path
    `generate` takes for heads of different widths): its prefill is shorter than the prompt and
    the same text."""
    P = list(rec.get("prompt_ids") or [])
    first = next((f for f in rec.get("forwards") or [] if f["model"] == "edge"
                  and not f.get("cache_len") and f.get("ids")), None)
    if not P or first is None or len(first["ids"]) >= len(P):
        return False
    text = lambda ids: tok.decode(ids, skip_special_tokens=True)   # noqa: E731
    return text(first["ids"]) == text(P)


def normalize(rec: dict, ctx) -> tuple[dict, dict]:
    """A recording whose edge has its own tokenizer, or is fed the text re-tokenized -> the
    same recording with the edge's forwards in the cloud's ids and positions, and notes (the
    widths, the special tokens of the cloud's prompt the edge's lacks: checks/noted/); others
    unchanged."""
    et, tok = rec.get("edge_tokenizer"), ctx.tokenizer
    same = not et and tok is not None and refed_as_text(rec, tok)
    if same:
        et = texts_of(tok, rec["forwards"], "the cloud's tokenizer")
    if not et or tok is None:
        return rec, {}
    frame = Frame(rec, tok, et)
    fwds = {f.i: f for f in replay([f for f in rec["forwards"] if f["model"] == "edge"])}
    out = [_forward(raw, fwds[raw["i"]], frame) if raw["model"] == "edge" else raw
           for raw in rec["forwards"]]
    lost, markers = _lost(frame, rec, next(iter(fwds.values()), None))
    return {**rec, "forwards": out}, {"retokenized": {
        "edge_width": et.get("width"), "cloud_width": frame.width, "source": et.get("source"),
        "lost": lost, "markers": markers, "same_tokenizer": same}}
