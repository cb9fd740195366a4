"""DecodeConfig: every knob of the design table, validated, with JSON round trip and presets."""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field, fields

from specdec_core.errors import ConfigError

VERIFY_RULES = ("greedy", "sampling", "rank")
CYCLE_ACTIONS = ("warn", "resample", "stop")
PROMPT_TYPES = ("detailed", "concise")


@dataclass
class DecodeConfig:
    k: int = 4
    verify: str = "greedy"
    rank_threshold: int = 5
    entropy_threshold: float | None = None
    verify_every: int | None = None  # None = k
    temperature: float = 0.0
    max_new_tokens: int = 128
    min_new_tokens: int = 16
    stop_at_first_sentence: bool = True
    prompt_type: str = "detailed"
    comma_gate: int = 0
    period_gate: int = 0
    ban_adjacent_repeat: bool = False
    no_repeat_ngram: int = 0
    repetition_penalty: float = 1.0
    cycle_action: str = "warn"
    seed: int = 0
    faults: list[str] = field(default_factory=list)
    # Not in the design table: how often (rounds) the edge cache is checked against a cache-free
    # recompute; 0 = never. Cheap on the demo pair and it is what exposes desync bugs.
    cache_check_every: int = 4
    # --- link model (issue 13; decoding/link.py) --------------------------------------------
    # A modelled network between edge and a local cloud, added per cloud call to the latency
    # metrics (e2e_s, ttft_s); 0 = off. A remote cloud (--cloud-url) measures its link instead.
    link_rtt_ms: float = 0.0        # round-trip time of one cloud call, ms
    link_uplink_kbps: float = 0.0   # uplink rate, kbit/s (0 = unlimited)

    def __post_init__(self):
        self.validate()

    @property
    def cadence(self) -> int:
        return self.k if self.verify_every is None else min(self.verify_every, self.k)

    @property
    def has_gates(self) -> bool:
        return bool(self.comma_gate or self.period_gate or self.ban_adjacent_repeat
                    or self.no_repeat_ngram or self.repetition_penalty != 1.0)

    def validate(self) -> None:
        _int_in(self, "k", 1, 32)
        _choice(self, "verify", VERIFY_RULES)
        _int_in(self, "rank_threshold", 1, 1000)
        if self.entropy_threshold is not None:
            _float_in(self, "entropy_threshold", 0.0, 1e9, allow_inf=True)
        if self.verify_every is not None:
            _int_in(self, "verify_every", 1, 32)
        _float_in(self, "temperature", 0.0, 10.0)
        _int_in(self, "max_new_tokens", 1, 4096)
        _int_in(self, "min_new_tokens", 0, 4096)
        _bool(self, "stop_at_first_sentence")
        _choice(self, "prompt_type", PROMPT_TYPES)
        _int_in(self, "comma_gate", 0, 64)
        _int_in(self, "period_gate", 0, 256)
        _bool(self, "ban_adjacent_repeat")
        _int_in(self, "no_repeat_ngram", 0, 8)
        if self.no_repeat_ngram == 1:
            raise ConfigError("no_repeat_ngram must be 0 (off) or between 2 and 8, got 1")
        _float_in(self, "repetition_penalty", 1.0, 10.0)
        _choice(self, "cycle_action", CYCLE_ACTIONS)
        _int_in(self, "seed", 0, 2**31 - 1)
        _int_in(self, "cache_check_every", 0, 10_000)
        # link model
        _float_in(self, "link_rtt_ms", 0.0, 600_000.0)
        _float_in(self, "link_uplink_kbps", 0.0, 1e9)
        if isinstance(self.faults, str):
            self.faults = [f for f in self.faults.replace(",", " ").split() if f]
        if not isinstance(self.faults, (list, tuple)):
            raise ConfigError(f"faults must be a list of fault names, got {self.faults!r}")
        from specdec_core.decoding.faults import FAULTS  # late import: faults imports config types

        for name in self.faults:
            if name not in FAULTS:
                raise ConfigError(f"unknown fault {name!r}; choose from {', '.join(FAULTS)}")
        self.faults = list(dict.fromkeys(self.faults))

    # --- serialisation -------------------------------------------------------------------
    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        if d["entropy_threshold"] is not None and math.isinf(d["entropy_threshold"]):
            d["entropy_threshold"] = "inf"  # JSON has no infinity
        return d

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, **kw)

    @classmethod
    def from_dict(cls, d: dict | None) -> "DecodeConfig":
        d = dict(d or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ConfigError(f"unknown knob(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        d = {k: _coerce(k, v) for k, v in d.items()}
        try:
            return cls(**d)
        except TypeError as e:  # wrong types that slipped through coercion
            raise ConfigError(str(e)) from None

    @classmethod
    def from_json(cls, text: str) -> "DecodeConfig":
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConfigError(f"config is not valid JSON: {e.msg} at line {e.lineno}") from None
        if not isinstance(d, dict):
            raise ConfigError("config JSON must be an object of knob: value")
        return cls.from_dict(d)

    def replace(self, **changes) -> "DecodeConfig":
        return DecodeConfig.from_dict({**self.to_dict(), **changes})


def _coerce(name: str, value):
    """Accept the string forms the CLI (--set k=v), query strings and JSON produce."""
    f = {f.name: f for f in fields(DecodeConfig)}[name]
    if name == "faults":
        return value
    if isinstance(value, str):
        s = value.strip()
        if name in ("entropy_threshold", "verify_every") and s.lower() in ("", "null", "none", "off"):
            return None
        if name == "entropy_threshold" and s.lower() in ("inf", "+inf", "infinity"):
            return math.inf
        t = str(f.type)
        try:
            if "bool" in t:
                if s.lower() in ("1", "true", "yes", "on"):
                    return True
                if s.lower() in ("0", "false", "no", "off"):
                    return False
                raise ValueError
            if t.startswith("int"):
                return int(s)
            if t.startswith("float"):
                return float(s)
        except ValueError:
            raise ConfigError(f"{name}: cannot read {value!r} as {t.split(' ')[0]}") from None
    return value


def _int_in(cfg, name, lo, hi):
    v = getattr(cfg, name)
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            v = int(v)
            setattr(cfg, name, v)
        else:
            raise ConfigError(f"{name} must be an integer in [{lo}, {hi}], got {v!r}")
    if not lo <= v <= hi:
        raise ConfigError(f"{name} must be in [{lo}, {hi}], got {v}")


def _float_in(cfg, name, lo, hi, allow_inf=False):
    v = getattr(cfg, name)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ConfigError(f"{name} must be a number in [{lo}, {hi}], got {v!r}")
    v = float(v)
    if math.isnan(v) or (math.isinf(v) and not (allow_inf and v > 0)):
        raise ConfigError(f"{name} must be a finite number in [{lo}, {hi}], got {v}")
    if not math.isinf(v) and not lo <= v <= hi:
        raise ConfigError(f"{name} must be in [{lo}, {hi}], got {v}")
    setattr(cfg, name, v)


def _choice(cfg, name, choices):
    v = getattr(cfg, name)
    if v not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {v!r}")


def _bool(cfg, name):
    v = getattr(cfg, name)
    if not isinstance(v, bool):
        raise ConfigError(f"{name} must be true or false, got {v!r}")


# Presets from the source notes. Each is a partial config applied over the defaults.
PRESETS: dict[str, dict] = {
    "classic": {"entropy_threshold": None, "verify": "greedy", "k": 4},
    "fluency_first": {"entropy_threshold": 5.75, "k": 4},          # seed 001 G
    "quality_first": {"entropy_threshold": 3.25, "k": 6},          # seed 001 G
    "seed000_fixed": {"verify": "rank", "rank_threshold": 4, "entropy_threshold": 1.5,
                      "verify_every": 5, "k": 5},                  # seed 000 C/E
    "seed001_gates": {"comma_gate": 4, "period_gate": 8, "ban_adjacent_repeat": True,
                      "no_repeat_ngram": 3, "repetition_penalty": 1.22,
                      "min_new_tokens": 16},                       # seed 001 C/D/E/F
}

PRESET_HELP = {
    "classic": "lossless speculative decoding: verify every block, greedy acceptance",
    "fluency_first": "seed 001: threshold 5.75 nats, k=4 - fewer cloud calls, longer edge runs",
    "quality_first": "seed 001: threshold 3.25 nats, k=6 - more cloud calls",
    "seed000_fixed": "seed 000: rank acceptance top-4, entropy threshold 1.5, checked every 5 tokens",
    "seed001_gates": "seed 001: comma/period gates, adjacent ban, CJK 3-gram ban, CJK repetition penalty",
}


def preset(name: str, **overrides) -> DecodeConfig:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
    return DecodeConfig.from_dict({**PRESETS[name], **overrides})
