"""The trace: the one data structure every view reads (token records, rounds, warnings)."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field


class TopK:
    """The edge's top alternatives for a drafted token, kept as plain lists; the dicts the views
    read are built only when the trace is serialised, off the decoding path."""

    __slots__ = ("ids", "probs", "texts")

    def __init__(self, ids, probs, texts):
        self.ids, self.probs, self.texts = ids, probs, texts

    def to_list(self) -> list[dict]:
        return [{"id": i, "text": self.texts[i], "prob": round(p, 5)} for i, p in zip(self.ids, self.probs)]


@dataclass
class TokenRecord:
    i: int                      # index among generated tokens (-1 for rejected ones)
    id: int
    text: str
    source: str                 # accepted | corrected | draft | bonus | rejected
    round: int
    entropy: float | None = None
    draft_prob: float | None = None
    target_prob: float | None = None
    target_rank: int | None = None
    top: "list | TopK" = field(default_factory=list)   # edge alternatives; to_dict gives dicts
    cycle: bool = False
    at: int | None = None       # rejected only: index of the committed token that replaced it
    audio_dependence: float | None = None   # nats; set after the decode (decoding/dependence.py)
    audio_free_id: int | None = None        # the cloud's argmax here without the audio
    cloud_top2: list | None = None   # verified: the verify row's [top-1 id, top-2 id, margin]
    node: int | None = None          # a tree round: its node index in round["tree"]["nodes"]
    drafter: str | None = None  # who drafted it: edge | head (drafter knob); None: the cloud's

    def to_dict(self) -> dict:
        # hand-written: dataclasses.asdict deep-copies recursively and showed up in profiles
        d = {"i": self.i, "id": self.id, "text": self.text, "source": self.source,
             "round": self.round, "entropy": self.entropy, "draft_prob": self.draft_prob,
             "target_prob": self.target_prob, "target_rank": self.target_rank,
             "drafter": self.drafter,
             "top": self.top.to_list() if isinstance(self.top, TopK) else self.top,
             "cycle": self.cycle, "audio_dependence": self.audio_dependence,
             "audio_free_id": self.audio_free_id}
        if self.node is not None:
            d["node"] = self.node
        if self.source == "rejected":
            d["at"] = self.at
        elif self.cloud_top2 is not None:
            d["cloud_top2"] = self.cloud_top2
        return d


@dataclass
class RoundRecord:
    round: int
    start: int                  # index of the first token committed in this round
    drafted: int
    verified: bool
    accepted: int = 0
    committed: int = 0
    max_entropy: float | None = None
    early_stop: bool = False    # drafting stopped before k because the gate fired
    cloud_fed: int = 0          # tokens the cloud consumed in its forward (catch-up + block)
    draft_s: float = 0.0
    verify_s: float = 0.0
    # Where the round's wall time went (analysis/metrics.time_split): round_s = the whole round,
    # edge_s / cloud_s = inside the models' forwards; recorder_s = the flight recorder's hooks
    # (recorded runs only). The rest (minus request_s for a remote cloud) is the loop's own time.
    round_s: float = 0.0
    edge_s: float = 0.0
    cloud_s: float = 0.0
    recorder_s: float = 0.0
    # The cloud call on the link (decoding/link.py): measured for a remote cloud (request_s set),
    # modelled for a local one (link_s: modelled transfer time, 0 with the link model off).
    bytes_up: int = 0
    bytes_down: int = 0
    link_s: float = 0.0
    request_s: float | None = None
    tree: dict | None = None    # a tree round: {"nodes": [...], "path": [...]} (design.md)
    # on a GPU: the round's device time (CUDA events around the forwards; decoding/device_time.py),
    # round_s minus it is the host's overhead; None on a CPU
    device_s: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Trace:
    prompt_len: int
    tokens: list[TokenRecord] = field(default_factory=list)
    rejected: list[TokenRecord] = field(default_factory=list)
    rounds: list[RoundRecord] = field(default_factory=list)
    cycles: list[dict] = field(default_factory=list)
    warnings: list[dict] = field(default_factory=list)
    metrics: dict = field(default_factory=dict)
    diagnostics: list[dict] = field(default_factory=list)
    ended_by: str = ""
    text: str = ""
    config: dict = field(default_factory=dict)
    backend: str = ""
    info: dict = field(default_factory=dict)

    @property
    def token_ids(self) -> list[int]:
        return [t.id for t in self.tokens]

    def to_dict(self) -> dict:
        return _finite({
            "backend": self.backend, "config": self.config, "info": self.info,
            "prompt_len": self.prompt_len, "text": self.text, "token_ids": self.token_ids,
            "ended_by": self.ended_by,
            "tokens": [t.to_dict() for t in self.tokens],
            "rejected": [t.to_dict() for t in self.rejected],
            "rounds": [r.to_dict() for r in self.rounds],
            "cycles": self.cycles, "warnings": self.warnings,
            "metrics": self.metrics, "diagnostics": self.diagnostics,
        })


def _finite(obj):
    """JSON has no NaN/inf: write them as strings so the file stays standard JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "inf" if obj > 0 else ("-inf" if obj < 0 else "nan")
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_finite(v) for v in obj]
    return obj
