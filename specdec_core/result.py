"""One judged result (docs/architecture.md, "One judged result"): what `record`, `run`, the page
and the served-engine audit each make of one clip or request. `to_dict()` is the JSON entry each
contract names (docs/cli.md); its findings are written by one step, recorder/report `finish`."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# each producer's JSON entry, key by key; a key that is no field of the result is read from
# `extra` (one of OPTIONAL absent there is left out)
SHAPES = {"record": ("audio", "ok", "text", "token_ids", "findings", "time_split", "trace", "recording",
                     "reference"),
          "run": ("audio", "ok", "text", "token_ids", "metrics", "trace", "baseline"),
          "page": ("ok", "error", "findings", "trace", "text", "token_ids", "recording"),
          "audit": ("audio", "ok", "text", "token_ids", "finish", "metrics", "reference", "steps", "trace")}
OPTIONAL = ("reference", "baseline", "finish", "steps")


@dataclass(eq=False)
class ClipResult(Mapping):
    shape: str = "record"              # which producer's JSON (SHAPES)
    audio: str | None = None
    ok: bool = True
    error: str | None = None
    trace: object = None               # a Trace, or a trace dict (a streamed run, `run`'s JSON)
    findings: list = field(default_factory=list)
    recording: dict | None = None      # None: nothing recorded (an audited request)
    evidence: object = None            # the clip's Evidence (recorder/evidence), when recorded
    ids: list | None = None            # the output (a user's loop: what it returned); else the trace's
    extra: dict = field(default_factory=dict)   # the producer's own keys (reference, baseline, ...)
    batch: dict | None = None          # a batched recording: {"rows", "batch", "row"} (report.finish)
    _json: dict | None = field(default=None, repr=False)

    def trace_dict(self) -> dict:
        return (self.trace.to_dict() if hasattr(self.trace, "to_dict") else self.trace) or {}

    def to_dict(self) -> dict:
        """The producer's JSON entry (a failed clip: audio, ok, error, and what was recorded)."""
        if not self.ok and self.shape != "page":
            return {"audio": self.audio, "ok": False, "error": self.error,
                    **({"recording": self.recording} if self.recording is not None else {})}
        td = self.trace_dict()
        own = {"text": td.get("text"), "token_ids": td.get("token_ids") if self.ids is None else self.ids,
               "metrics": td.get("metrics"), "time_split": (td.get("metrics") or {}).get("time_split"),
               "trace": td, **self.extra}
        return {k: own[k] if k in own else getattr(self, k) for k in SHAPES[self.shape]
                if k in self.extra or k not in OPTIONAL}

    # read as a mapping, the JSON entry is built once (a finished result is not changed after)
    def _d(self) -> dict:
        self._json = self.to_dict() if self._json is None else self._json
        return self._json

    __getitem__ = lambda self, key: self._d()[key]   # noqa: E731
    __iter__ = lambda self: iter(self._d())          # noqa: E731
    __len__ = lambda self: len(self._d())            # noqa: E731

    def identities(self) -> list[str]:
        """The metric identities the result breaks, one line each (empty: none). Verify forwards: the
        recorded cloud forwards, a prefill counted where its token is a round of its own. A result with
        an error finding says why its rounds or coloured tokens differ (those two are not held then)."""
        e, said = self.evidence, any(f.get("severity") == "error" for f in self.findings or [])
        cloud = [] if e is None else [f for f in e.t.fwds if f.model == "cloud"]
        fwds = (len(cloud), sum(f.ctx is not None and len(f.ctx) > e.t.P for f in cloud)) if cloud else None
        return identities(self.trace_dict(), self["token_ids"] if self.ok else [], fwds, said)


def identities(td: dict, out: list | None = None, forwards: tuple | None = None, said: bool = False) -> list[str]:
    """What a trace dict's metrics break of: rounds = verify forwards (`forwards`, default the cloud's;
    unless `rounds_differ` or `said`), accepted <= drafted, acceptance = accepted / drafted, mean
    accepted length = 1 + accepted / rounds, the coloured tokens add up to `out` (unless `said`)."""
    m, toks = td.get("metrics") or {}, td.get("tokens") or []
    verified = [r for r in td.get("rounds") or [] if r.get("verified")]
    n, drafted, accepted = len(verified), sum(r["drafted"] for r in verified), sum(r["accepted"] for r in verified)
    forwards = (m.get("target_forwards"),) if forwards is None else forwards
    over, said = [r["round"] for r in verified if r["accepted"] > r["drafted"]], said or m.get("rounds_differ")
    want = (round(accepted / drafted, 4) if drafted else None, round(1 + accepted / n, 4) if n else None)
    out = td.get("token_ids") if out is None else out
    return [line for bad, line in (
        (None not in forwards and n not in forwards and not said,
         f"rounds: {n} verified rounds for {' or '.join(map(str, sorted(set(forwards))))} verify forwards"),
        (bool(over), f"accepted <= drafted: {accepted} accepted of {drafted} drafted (rounds {over[:5]})"),
        (m.get("acceptance_rate") != want[0], f"acceptance: {m.get('acceptance_rate')} for {accepted}/{drafted}"),
        (m.get("mean_accepted_length") != want[1],
         f"mean accepted length: {m.get('mean_accepted_length')} for 1 + {accepted}/{n}"),
        (len(toks) != len(out or []) and not said, f"coloured tokens: {len(toks)} for an output of {len(out or [])}"))
        if bad]
