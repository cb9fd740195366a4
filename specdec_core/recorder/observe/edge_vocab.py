"""Record side of a drafter with its own tokenizer (issue 36, recorder/normalize/retokenized.py reads it):
when the edge's vocabulary differs from the cloud's, the tokenizer saved with the edge's weights
(`edge.name_or_path`) gives the text of every edge id the recording holds; the recording keeps
them (`edge_tokenizer`: width, source, texts, specials)."""
from __future__ import annotations

from specdec_core.recorder.observe import Observer


class EdgeVocab(Observer):
    def finish(self, recording):
        recording.update(edge_texts(self.r.models["edge"], recording["vocab"], recording["forwards"],
                                    self.r.tokenizer))


def _edge_ids(forwards) -> set[int]:
    ids: set[int] = set()
    for f in forwards:
        if f["model"] != "edge":
            continue
        ids.update(f.get("ids") or [])
        rows = f.get("rows") or {}
        ids.update(rows.get("argmax") or [])
        for top in rows.get("top_ids") or []:
            ids.update(top)
    return ids


def edge_texts(edge, vocab: dict, forwards: list[dict], tokenizer=None) -> dict:
    """{"edge_tokenizer": ...} for a recording whose edge has its own vocabulary, else {}
    (heads of different widths over one tokenizer, e.g. Qwen2.5-Omni 3B / 7B, share ids)."""
    from transformers import AutoTokenizer

    path = getattr(edge, "name_or_path", "") or ""
    if not vocab.get("edge") or vocab.get("edge") == vocab.get("cloud") or not path:
        return {}
    try:
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except (OSError, ValueError, TypeError):
        return {}
    if tok is None or (tokenizer is not None and tok.get_vocab() == tokenizer.get_vocab()):
        return {}
    return {"edge_tokenizer": texts_of(tok, forwards, path)}


def texts_of(tok, forwards: list[dict], source) -> dict:
    """The text of every edge id of the recording under `tok` (its specials by name)."""
    ids = sorted(i for i in _edge_ids(forwards) if 0 <= i < len(tok))
    special = set(tok.all_special_ids) | {i for i, t in tok.added_tokens_decoder.items() if t.special}
    return {"width": len(tok), "source": source,
            "texts": {str(i): tok.decode([i], skip_special_tokens=True) for i in ids},
            "specials": {str(i): tok.convert_ids_to_tokens(i) for i in ids if i in special}}
