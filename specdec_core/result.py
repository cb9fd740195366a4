"""One judged result (docs/architecture.md, "One judged result"): what `record`, `run`, the page
and the served-engine audit each make of one clip or request. A `ClipResult` carries the text,
ids, trace, findings, recording and its Evidence (the pooled checks read it); `to_dict()` is the
JSON entry each contract names (docs/cli.md), the result read as a mapping is that entry.
Its findings and its trace's diagnostics are written by one step, recorder/report `finish`."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# the JSON entry of each producer, key by key in order; a key that is not a field of the result
# comes from `extra` (absent there: left out)
SHAPES = {
    "record": ("audio", "ok", "text", "token_ids", "findings", "time_split", "trace", "recording",
               "reference"),
    "run": ("audio", "ok", "text", "token_ids", "metrics", "trace", "baseline"),
    "page": ("ok", "error", "findings", "trace", "text", "token_ids", "recording"),
    "audit": ("audio", "ok", "text", "token_ids", "finish", "metrics", "reference", "steps", "trace"),
}


@dataclass(eq=False)
class ClipResult(Mapping):
    shape: str = "record"              # which producer's JSON (SHAPES)
    audio: str | None = None
    ok: bool = True
    error: str | None = None
    trace: object = None               # a Trace, or a trace dict (the page's streamed run)
    findings: list = field(default_factory=list)
    recording: dict | None = None      # None: nothing recorded (an audited request)
    evidence: object = None            # the clip's Evidence (recorder/evidence), when recorded
    ids: list | None = None            # the output (a user's loop: what it returned); else the trace's
    extra: dict = field(default_factory=dict)   # the producer's own keys (reference, baseline, ...)
    batch: dict | None = None          # a batched recording: {"rows", "batch", "row"} (report.finish)
    _json: dict | None = field(default=None, repr=False)

    @property
    def trace_dict(self) -> dict:
        t = self.trace
        return (t.to_dict() if hasattr(t, "to_dict") else t) or {}

    def _field(self, key: str, td: dict):
        if key in self.extra:
            return self.extra[key]
        if key == "text":
            return td.get("text")
        if key == "token_ids":
            return td.get("token_ids") if self.ids is None else self.ids
        if key == "metrics":
            return getattr(self.trace, "metrics", None) or td.get("metrics")
        if key == "time_split":
            return (td.get("metrics") or {}).get("time_split")
        if key == "trace":
            return td
        return getattr(self, key)

    def to_dict(self) -> dict:
        """The producer's JSON entry (a failed clip: audio, ok, error, and what was recorded)."""
        if not self.ok and self.shape != "page":
            d = {"audio": self.audio, "ok": False, "error": self.error, "recording": self.recording}
            return {k: v for k, v in d.items() if k != "recording" or v is not None}
        td = self.trace_dict
        return {k: self._field(k, td) for k in SHAPES[self.shape]
                if k in self.extra or k not in ("reference", "baseline", "finish", "steps")}

    # read as a mapping: the JSON entry, built once (a finished result is not changed after)
    def _d(self) -> dict:
        if self._json is None:
            self._json = self.to_dict()
        return self._json

    def __getitem__(self, key):
        return self._d()[key]

    def __iter__(self):
        return iter(self._d())

    def __len__(self) -> int:
        return len(self._d())

    def identities(self) -> list[str]:
        """The metric identities this result breaks (empty: none), one line each: rounds =
        verify forwards, accepted <= drafted, acceptance = accepted / drafted, mean accepted
        length = 1 + accepted / rounds, the coloured tokens add up to the output."""
        return identities(self.trace_dict, self["token_ids"] if self.ok else [])


def identities(td: dict, out: list | None = None) -> list[str]:
    """metric identities broken by a trace dict (its metrics against its rounds and tokens)."""
    m, rounds, toks = td.get("metrics") or {}, td.get("rounds") or [], td.get("tokens") or []
    verified = [r for r in rounds if r.get("verified")]
    drafted, accepted = sum(r["drafted"] for r in verified), sum(r["accepted"] for r in verified)
    broken = []
    forwards = m.get("verify_forwards", m.get("target_forwards"))
    if forwards is not None and forwards != len(verified) and not m.get("rounds_differ"):
        broken.append(f"rounds: {len(verified)} verified rounds for {forwards} verify forwards")
    over = [r["round"] for r in verified if r["accepted"] > r["drafted"]]
    if over or accepted > drafted:
        broken.append(f"accepted <= drafted: {accepted} accepted of {drafted} drafted (rounds {over[:5]})")
    want = round(accepted / drafted, 4) if drafted else None
    if m.get("acceptance_rate") != want:
        broken.append(f"acceptance: {m.get('acceptance_rate')} for {accepted}/{drafted} = {want}")
    want = round(1 + accepted / len(verified), 4) if verified else None
    if m.get("mean_accepted_length") != want:
        broken.append(f"mean accepted length: {m.get('mean_accepted_length')} for 1 + "
                      f"{accepted}/{len(verified)} = {want}")
    n = len(td.get("token_ids") if out is None else out)
    if len(toks) != n:
        broken.append(f"coloured tokens: {len(toks)} for an output of {n}")
    return broken
