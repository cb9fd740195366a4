"""DecodeConfig: every knob of the design table, validated, with JSON round trip and presets."""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, fields

from specdec_core.decoding.knobs import Knob, LazyNames, Unit, knob, schema, short
from specdec_core.errors import ConfigError

VERIFY_RULES = ("greedy", "sampling", "rank")
DRAFT_TREES = ("chain", "static", "dynamic")
CYCLE_ACTIONS = ("warn", "resample", "stop")
DRAFTERS = ("edge", "head")
ENGINES = ("eager", "static", "graphs")    # decoding/engine.py (issue 44)
PROMPT_TYPES = ("detailed", "concise")
# entropy_threshold's units: nats, or a fraction of ln|V| (the most entropy a distribution over
# the |V| ids the edge drafts from can have), which means the same on any vocabulary.
ENTROPY_UNITS = (
    Unit("nats", 0.0, 20.0, 0.05, "entropy threshold (nats)", note="nats or inf", allow_inf=True,
         start=2.0),
    Unit("frac", 0.0, 1.0, 0.005, "entropy threshold (× ln|V|)",
         note="as a fraction of ln|V|; entropy_unit=nats takes nats", start=0.3),
)
QWEN_VOCAB = 151_936   # Qwen2.5 edge logits' width, the vocabulary the seed notes' nats were for


@dataclass
class DecodeConfig:
    """Every knob; each field's Knob (range, step, label, help, widget) is its metadata."""
    k: int = knob("int", 4, minimum=1, maximum=32, step=1, label="draft length k", group="draft",
                  kind="slider", help="Max draft tokens per round.")
    draft_tree: str = knob("choice", "chain", choices=DRAFT_TREES, label="draft tree", group="draft",
                           kind="dropdown", design=False,
                           help="chain: k drafts in a row. static: a fixed Medusa-style tree of "
                                "paths. dynamic: EAGLE-2, the most probable frontier nodes expanded "
                                "depth by depth up to k. A tree is verified in ONE cloud forward "
                                "with a tree attention mask.")
    tree_branch: int = knob("int", 2, minimum=1, maximum=8, step=1, label="tree branch",
                            group="draft", kind="slider", design=False,
                            help="Trees: children per expanded node (and nodes expanded per depth "
                                 "for dynamic).")
    tree_nodes: int = knob("int", 10, minimum=1, maximum=64, step=1, label="tree nodes",
                           group="draft", kind="slider", design=False,
                           help="Trees: draft nodes verified per cloud call.")
    drafter: str = knob("choice", "edge", choices=DRAFTERS, label="drafter", group="draft",
                        kind="dropdown", design=False,
                        help="edge: the edge model drafts. head: an EAGLE-style head on the "
                             "cloud's own last hidden states drafts (read out by the cloud's LM "
                             "head; the demo backend ships one).")
    verify: str = knob("choice", "greedy", choices=VERIFY_RULES, label="acceptance rule",
                       group="verify", kind="dropdown",
                       help="greedy: accept while draft == cloud argmax (lossless). sampling: "
                            "min(1, p/q) (lossless in distribution). rank: accept while cloud "
                            "rank <= rank_threshold (lossy).")
    rank_threshold: int = knob("int", 5, minimum=1, maximum=1000, step=1, label="rank threshold",
                               group="verify", kind="number",
                               help="For verify=rank: accept a draft token while its cloud rank "
                                    "is at most this.")
    entropy_threshold: float | None = knob(
        "float", None, units=ENTROPY_UNITS, unit_knob="entropy_unit",
        group="verify", kind="slider", nullable=True, off_label="off (verify every block)",
        help="Call the cloud only when draft entropy exceeds this (in entropy_unit); off = verify "
             "every block (classic speculative decoding); inf = never (edge only, nats only).")
    # |V| = the width of the edge logits; the decoder turns frac into nats once per run (trace
    # info entropy_threshold_nats, vocab_size)
    entropy_unit: str = knob(
        "choice", "nats", choices=tuple(u.name for u in ENTROPY_UNITS), design=False,
        label="entropy threshold unit", group="verify", kind="dropdown",
        help="nats: the threshold in nats. frac: a fraction of ln|V| (the largest entropy on the "
             "draft vocabulary), so one value means the same on the demo's 772 ids and Qwen's "
             "151,936.")
    verify_every: int | None = knob(
        "int", None, minimum=1, maximum=32, step=1, label="verify every", group="verify",
        kind="slider", nullable=True, null_words=("", "off", "none", "null", "k"), off_label="= k",
        help="Check the entropy gate every this many drafted tokens; default = k.")
    temperature: float = knob("float", 0.0, minimum=0.0, maximum=2.0, step=0.05, label="temperature",
                              group="draft", kind="slider",
                              help="0 = greedy. Applied once to the draft logits.")
    max_new_tokens: int = knob("int", 128, minimum=1, maximum=4096, step=1, label="max new tokens",
                               group="stop", kind="number", help="Hard cap on generated tokens.")
    min_new_tokens: int = knob("int", 16, minimum=0, maximum=4096, step=1, label="min new tokens",
                               group="stop", kind="number",
                               help="The first-sentence stop only applies after this many tokens.")
    stop_at_first_sentence: bool = knob("bool", True, label="stop at first sentence", group="stop",
                                        kind="checkbox",
                                        help="Stop at the first 。/. after min_new_tokens (by token id).")
    prompt_type: str = knob("choice", "detailed", choices=PROMPT_TYPES, label="prompt type",
                            group="run", kind="dropdown",
                            help="detailed: 30–70 汉字; concise: 8–16 汉字.")
    comma_gate: int = knob("int", 0, minimum=0, maximum=64, step=1, label="comma gate", group="gates",
                           kind="slider",
                           help="Min CJK content chars before ，、： may be drafted (0 = off).")
    period_gate: int = knob("int", 0, minimum=0, maximum=256, step=1, label="period gate",
                            group="gates", kind="slider",
                            help="Min CJK content chars before 。 may be drafted (0 = off).")
    ban_adjacent_repeat: bool = knob("bool", False, label="ban adjacent repeat", group="gates",
                                     kind="checkbox",
                                     help="Forbid the same CJK char twice in a row in the draft.")
    no_repeat_ngram: int = knob("int", 0, minimum=0, maximum=8, step=1, label="no-repeat n-gram",
                                group="gates", kind="slider", exclude=(1,),
                                exclude_msg="no_repeat_ngram must be 0 (off) or between 2 and 8, got 1",
                                help="Ban repeating n-grams over the punctuation-stripped CJK "
                                     "history (0 = off, else 2–8).")
    repetition_penalty: float = knob("float", 1.0, minimum=1.0, maximum=10.0, step=0.01,
                                     label="repetition penalty", group="gates", kind="slider",
                                     help="Multiplicative penalty on already-used CJK content "
                                          "chars (1.0 = off).")
    cycle_action: str = knob("choice", "warn", choices=CYCLE_ACTIONS, label="on cycle", group="stop",
                             kind="dropdown",
                             help="warn: flag it; resample: local top-k resample at temperature; "
                                  "stop: end decoding.")
    seed: int = knob("int", 0, minimum=0, maximum=2**31 - 1, step=1, label="seed", group="run",
                     kind="number", help="Random seed for sampling.")
    faults: list[str] = knob("faults", [], choices=LazyNames("specdec_core.decoding.faults", "FAULTS"),
                             label="faults (bug zoo)", group="run", kind="multiselect",
                             help="Re-create a bug from the source notes to see its symptom.")
    # cheap on the demo pair, and what exposes desync bugs
    cache_check_every: int = knob("int", 4, minimum=0, maximum=10_000, step=1, design=False,
                                  label="cache check every (rounds)", group="checks", kind="number",
                                  help="Compare the edge cache with a cache-free recompute every "
                                       "this many rounds (0 = never).")
    # the run ends with ended_by="time_limit" (docs/architecture.md); the default suits a Space
    time_limit_s: float = knob("float", 60.0, minimum=0.0, maximum=3600.0, step=1, design=False,
                               label="time limit (s)", group="stop", kind="number",
                               help="End the decode after this many seconds of wall time "
                                    "(0 = no limit).")
    # A modelled network between the edge and a local cloud (decoding/link.py), added per cloud
    # call to the latency metrics (e2e_s, ttft_s); 0 = off. A remote cloud measures its own link.
    link_rtt_ms: float = knob("float", 0.0, minimum=0.0, maximum=600_000.0, step=1, design=False,
                              label="link RTT (ms)", group="link", kind="number",
                              help="Modelled round-trip time of one cloud call (0 = off).")
    link_uplink_kbps: float = knob("float", 0.0, minimum=0.0, maximum=1e9, step=1, design=False,
                                   label="link uplink (kbit/s)", group="link", kind="number",
                                   help="Modelled uplink rate for the ids sent per cloud call "
                                        "(0 = unlimited).")
    engine: str = knob("choice", "eager", choices=ENGINES, label="engine", group="run",
                       kind="dropdown", design=False,
                       help="eager: a growing KV cache, each forward its own shape. static: "
                            "preallocated KV caches, fixed-width steps, rollback by write "
                            "position (any device). graphs: static steps captured as CUDA "
                            "graphs (CUDA only).")

    def __post_init__(self):
        self.validate()

    @property
    def cadence(self) -> int:
        return self.k if self.verify_every is None else min(self.verify_every, self.k)

    def validate(self) -> None:
        """Check and normalise every knob against its schema entry (ConfigError, one line);
        a knob with units is checked in the unit its unit knob picks, after that knob."""
        for spec in sorted(KNOBS.values(), key=lambda s: bool(s.unit_knob)):
            setattr(self, spec.name, spec.resolve(vars(self)).check(getattr(self, spec.name)))

    def threshold_nats(self, vocab_size: int) -> float | None:
        """entropy_threshold in nats for drafts over `vocab_size` ids (None: no gate)."""
        t = self.entropy_threshold
        if t is None or self.entropy_unit == "nats":
            return t
        return t * math.log(vocab_size)

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
        d = {k: KNOBS[k].parse(v) for k, v in d.items()}
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

    @classmethod
    def from_overrides(cls, base: dict | None = None, sets=(), faults=()) -> "DecodeConfig":
        """The CLI's config: base knobs (a --config JSON) + `--set KEY=VALUE` + `--fault NAME`."""
        d = {**(base or {}), **parse_sets(sets)}
        if faults:
            d["faults"] = list(KNOBS["faults"].parse(d.get("faults") or [])) + list(faults)
        return cls.from_dict(d)

    def replace(self, **changes) -> "DecodeConfig":
        return DecodeConfig.from_dict({**self.to_dict(), **changes})


KNOBS: dict[str, Knob] = schema(DecodeConfig)


def parse_sets(sets) -> dict:
    """['k=6', 'faults=no_resync,mask_1x1', ...] (CLI --set) -> {knob: raw string}."""
    out = {}
    for kv in sets or ():
        if "=" not in kv:
            raise ConfigError(f"--set expects KEY=VALUE, got {short(kv)}")
        key, value = kv.split("=", 1)
        out[key.strip()] = value
    return out


def _frac(nats: float) -> float:
    """A seed note's threshold (nats on Qwen's vocabulary) as a fraction of ln|V|."""
    return round(nats / math.log(QWEN_VOCAB), 3)


# Presets from the source notes. Each is a partial config applied over the defaults. The
# entropy thresholds were tuned in nats on Qwen (ln 151936 = 11.93 nats at most); they are kept
# as fractions of ln|V| so they mean the same on any vocabulary (the demo's ln 772 = 6.65).
PRESETS: dict[str, dict] = {
    "classic": {"entropy_threshold": None, "verify": "greedy", "k": 4},
    "fluency_first": {"entropy_threshold": _frac(5.75), "entropy_unit": "frac", "k": 4},  # 001 G
    "quality_first": {"entropy_threshold": _frac(3.25), "entropy_unit": "frac", "k": 6},  # 001 G
    "seed000_fixed": {"verify": "rank", "rank_threshold": 4, "entropy_threshold": _frac(1.5),
                      "entropy_unit": "frac", "verify_every": 5, "k": 5},  # seed 000 C/E
    "seed001_gates": {"comma_gate": 4, "period_gate": 8, "ban_adjacent_repeat": True,
                      "no_repeat_ngram": 3, "repetition_penalty": 1.22,
                      "min_new_tokens": 16},                       # seed 001 C/D/E/F
}
DEMO_VOCAB = 772       # the demo pair's vocabulary, for the help text only


def _both(name: str) -> str:
    """A preset's threshold in both forms: "0.482·ln|V| = 5.75 nats on Qwen, 3.20 on the demo"."""
    f = PRESETS[name]["entropy_threshold"]
    return (f"threshold {f:g}·ln|V| = {f * math.log(QWEN_VOCAB):.2f} nats on Qwen, "
            f"{f * math.log(DEMO_VOCAB):.2f} on the demo")


PRESET_HELP = {
    "classic": "lossless speculative decoding: verify every block, greedy acceptance",
    "fluency_first": f"seed 001: {_both('fluency_first')}, k=4 - fewer cloud calls, longer edge runs",
    "quality_first": f"seed 001: {_both('quality_first')}, k=6 - more cloud calls",
    "seed000_fixed": f"seed 000: rank acceptance top-4, entropy {_both('seed000_fixed')}, "
                     "checked every 5 tokens",
    "seed001_gates": "seed 001: comma/period gates, adjacent ban, CJK 3-gram ban, CJK repetition penalty",
}


def preset(name: str, **overrides) -> DecodeConfig:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
    return DecodeConfig.from_dict({**PRESETS[name], **overrides})
