"""Knob descriptions for the UI (one per DecodeConfig field) and share-link query strings.

Names match the knob table of ../shared/design.md exactly. Ranges here are what the widgets
offer; DecodeConfig stays the authority on validity (it refuses bad values with ConfigError).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode

from specdec_core.errors import ConfigError

FAULTS = (
    "string_stop", "special_text_stop", "draft_penalties", "lenient_rank",
    "no_resync", "double_temperature", "mask_1x1", "input_corruption",
)


@dataclass(frozen=True)
class KnobSpec:
    name: str
    kind: str                     # slider | dropdown | checkbox | number | multiselect
    default: object
    label: str
    help: str
    group: str                    # draft | verify | stop | gates | run
    minimum: float | None = None
    maximum: float | None = None
    step: float | None = None
    choices: tuple = ()
    nullable: bool = False        # None is a legal value, shown as `off_label`
    off_label: str = ""
    integer: bool = False
    extra: dict = field(default_factory=dict)


KNOB_SPECS: list[KnobSpec] = [
    KnobSpec("k", "slider", 4, "draft length k", "Max draft tokens per round.", "draft",
             1, 16, 1, integer=True),
    KnobSpec("verify", "dropdown", "greedy", "acceptance rule",
             "greedy: accept while draft == cloud argmax (lossless). sampling: min(1, p/q) "
             "(lossless in distribution). rank: accept while cloud rank <= rank_threshold (lossy).",
             "verify", choices=("greedy", "sampling", "rank")),
    KnobSpec("rank_threshold", "slider", 5, "rank threshold",
             "For verify=rank: accept a draft token while its cloud rank is at most this.", "verify",
             1, 50, 1, integer=True),
    KnobSpec("entropy_threshold", "slider", None, "entropy threshold (nats)",
             "Call the cloud only when draft entropy exceeds this; off = verify every block "
             "(classic speculative decoding).", "verify", 0.0, 6.0, 0.05,
             nullable=True, off_label="off (verify every block)"),
    KnobSpec("verify_every", "slider", None, "verify every",
             "Check the entropy gate every this many drafted tokens; default = k.", "verify",
             1, 16, 1, nullable=True, off_label="= k", integer=True),
    KnobSpec("temperature", "slider", 0.0, "temperature",
             "0 = greedy. Applied once to the draft logits.", "draft", 0.0, 2.0, 0.05),
    KnobSpec("max_new_tokens", "number", 128, "max new tokens", "Hard cap on generated tokens.", "stop",
             1, 1024, 1, integer=True),
    KnobSpec("min_new_tokens", "number", 16, "min new tokens",
             "The first-sentence stop only applies after this many tokens.", "stop", 0, 1024, 1, integer=True),
    KnobSpec("stop_at_first_sentence", "checkbox", True, "stop at first sentence",
             "Stop at the first 。/. after min_new_tokens (by token id).", "stop"),
    KnobSpec("prompt_type", "dropdown", "detailed", "prompt type",
             "detailed: 30–70 汉字; concise: 8–16 汉字.", "run", choices=("detailed", "concise")),
    KnobSpec("comma_gate", "slider", 0, "comma gate",
             "Min CJK content chars before ，、： may be drafted (0 = off).", "gates", 0, 20, 1, integer=True),
    KnobSpec("period_gate", "slider", 0, "period gate",
             "Min CJK content chars before 。 may be drafted (0 = off).", "gates", 0, 40, 1, integer=True),
    KnobSpec("ban_adjacent_repeat", "checkbox", False, "ban adjacent repeat",
             "Forbid the same CJK char twice in a row in the draft.", "gates"),
    KnobSpec("no_repeat_ngram", "slider", 0, "no-repeat n-gram",
             "Ban repeating n-grams over the punctuation-stripped CJK history (0 = off).", "gates",
             0, 8, 1, integer=True),
    KnobSpec("repetition_penalty", "slider", 1.0, "repetition penalty",
             "Multiplicative penalty on already-used CJK content chars (1.0 = off).", "gates", 1.0, 2.0, 0.05),
    KnobSpec("cycle_action", "dropdown", "warn", "on cycle",
             "warn: flag it; resample: local top-k resample at temperature; stop: end decoding.", "stop",
             choices=("warn", "resample", "stop")),
    KnobSpec("seed", "number", 0, "seed", "Random seed for sampling.", "run", 0, 2**31 - 1, 1, integer=True),
    KnobSpec("faults", "multiselect", (), "faults (bug zoo)",
             "Re-create a bug from the source notes to see its symptom.", "run", choices=FAULTS),
]

SPECS_BY_NAME = {s.name: s for s in KNOB_SPECS}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_NULL = {"", "off", "none", "null", "k"}


def default_config() -> dict:
    return {s.name: list(s.default) if s.kind == "multiselect" else s.default for s in KNOB_SPECS}


def _normal(spec: KnobSpec, value):
    if spec.kind == "multiselect":
        return sorted(value or [])
    if isinstance(value, float) and value.is_integer() and spec.integer:
        return int(value)
    return value


def _encode(spec: KnobSpec, value) -> str:
    if value is None:
        return "off"
    if isinstance(value, bool):
        return "1" if value else "0"
    if spec.kind == "multiselect":
        return ",".join(value)
    if spec.integer and isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value) if isinstance(value, float) else str(value)


def config_to_query(cfg: dict) -> str:
    """Share-link query (no leading '?') with only the knobs that differ from the defaults."""
    pairs = []
    for spec in KNOB_SPECS:
        if spec.name not in cfg:
            continue
        value = cfg[spec.name]
        if _normal(spec, value) != _normal(spec, spec.default):
            pairs.append((spec.name, _encode(spec, value)))
    return urlencode(pairs, safe=",")


def _decode(spec: KnobSpec, raw: str):
    text = raw.strip()
    bad = ConfigError(f"share link: {spec.name}={raw!r} is not a valid {spec.label}")
    if spec.nullable and text.lower() in _NULL:
        return None
    if spec.kind == "checkbox":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise bad
    if spec.kind == "dropdown":
        if text not in spec.choices:
            raise ConfigError(f"share link: {spec.name}={raw!r} is not one of {', '.join(spec.choices)}")
        return text
    if spec.kind == "multiselect":
        names = [n.strip() for n in text.split(",") if n.strip()]
        unknown = [n for n in names if n not in spec.choices]
        if unknown:
            raise ConfigError(f"share link: unknown {spec.name} {', '.join(unknown)}")
        return names
    try:
        number = float(text)
    except ValueError:
        raise bad from None
    if not math.isfinite(number):
        raise bad
    if spec.integer:
        if not number.is_integer():
            raise bad
        return int(number)
    return number


def query_to_config(query: str) -> dict:
    """The full knob dict (defaults + the link's values); unknown keys are ignored."""
    cfg = default_config()
    for key, raw in parse_qsl((query or "").lstrip("?"), keep_blank_values=True):
        spec = SPECS_BY_NAME.get(key)
        if spec is not None:
            cfg[key] = _decode(spec, raw)
    return cfg
