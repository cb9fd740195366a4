"""Fold streaming decoder events (decoder.stream / api.stream_prompt) into a partial trace dict,
the shape the views read, so a UI can redraw after every round. The event schema is in
docs/architecture.md; this module is its one reader."""
from __future__ import annotations


class LiveTrace:
    """trace: the partial trace dict (the final Trace.to_dict() once "done" arrived).
    tokenizer: give it so that text() follows the final text's rule (decode with
    skip_special_tokens, so no <|im_end|> while streaming); without it, token texts are joined."""

    def __init__(self, config: dict | None = None, tokenizer=None):
        self.tokenizer = tokenizer
        self.trace: dict = {"tokens": [], "rejected": [], "rounds": [], "warnings": [], "cycles": [],
                            "config": dict(config or {}), "info": {}, "metrics": {}}
        self.done = False
        self.final = None   # the Trace object of the "done" event

    def add(self, ev: dict) -> list[dict]:
        """Apply one event; returns the new warnings it carried."""
        kind = ev.get("type")
        if kind == "start":
            self.trace["info"] = ev.get("info") or {}
            self.trace["prompt_len"] = ev.get("prompt_len")
            return []
        if kind == "round":
            self.trace["rounds"].append(ev.get("round") or {})
            self.trace["tokens"].extend(ev.get("tokens") or [])
            self.trace["rejected"].extend(ev.get("rejected") or [])
            new = list(ev.get("warnings") or [])
            self.trace["warnings"].extend(new)
            for w in new:  # cycles stream in as warnings; the token view marks their spans
                if w.get("kind") == "cycle":
                    self.trace["cycles"].append({k: w.get(k) for k in ("start", "end", "period", "text")})
            return new
        if kind == "done":
            self.final = ev["trace"]
            self.trace = self.final.to_dict()
            self.done = True
        return []

    @property
    def n_tokens(self) -> int:
        return len(self.trace["tokens"])

    def text(self) -> str:
        if self.done:
            return self.trace.get("text", "")
        if self.tokenizer is not None:
            ids = [t["id"] for t in self.trace["tokens"]]
            return self.tokenizer.decode(ids, skip_special_tokens=True)
        return "".join(t.get("text") or "" for t in self.trace["tokens"])
