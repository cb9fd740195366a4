"""Knob widgets' settings and share-link queries, from the one knob schema (decoding.config.KNOBS)."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

from specdec_core.decoding.config import KNOBS, DecodeConfig
from specdec_core.decoding.knobs import Knob
from specdec_core.errors import ConfigError

KNOB_SPECS: list[Knob] = list(KNOBS.values())
SPECS_BY_NAME: dict[str, Knob] = dict(KNOBS)
DESIGN_KNOBS: list[str] = [s.name for s in KNOB_SPECS if s.design]


def default_config() -> dict:
    return {s.name: list(s.default) if isinstance(s.default, list) else s.default for s in KNOB_SPECS}


def _normal(spec: Knob, value):
    if spec.type == "faults":
        return sorted(value or [])
    if isinstance(value, float) and value.is_integer() and spec.integer:
        return int(value)
    return value


def config_to_query(cfg: dict) -> str:
    """Share-link query (no leading '?') with only the knobs that differ from the defaults."""
    pairs = [(s.name, s.encode(cfg[s.name])) for s in KNOB_SPECS
             if s.name in cfg and _normal(s, cfg[s.name]) != _normal(s, s.default)]
    return urlencode(pairs, safe=",")


def query_to_config(query: str) -> dict:
    """The full knob dict (defaults + the link's checked values); unknown keys (e.g. sample) ignored."""
    cfg = default_config()
    for key, raw in parse_qsl((query or "").lstrip("?"), keep_blank_values=True):
        spec = SPECS_BY_NAME.get(key)
        if spec is None:
            continue
        cfg[key] = spec.check(spec.parse(raw))
    return cfg


# ---- knobs whose unit another knob picks (entropy_threshold in entropy_unit) -----------------
UNIT_KNOBS: dict[str, list[str]] = {}
for _s in KNOB_SPECS:
    if _s.unit_knob:
        UNIT_KNOBS.setdefault(_s.unit_knob, []).append(_s.name)


def widget_settings(name: str, cfg: dict) -> dict:
    """Bounds, step and label of knob `name`'s widget in the unit `cfg` picks (the schema's)."""
    s = SPECS_BY_NAME[name].resolve(cfg)
    return {"minimum": s.minimum, "maximum": s.maximum, "step": s.step, "label": s.label}


def widget_value(name: str, cfg: dict, value):
    """Where `name`'s widget sits for `value` in the unit `cfg` picks (never converted between units)."""
    s = SPECS_BY_NAME[name].resolve(cfg)
    start = s.start if s.start is not None else s.minimum
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return value if ok and s.minimum <= value <= s.maximum else start


def checked_for_widgets(cfg: dict) -> dict:
    """A full, valid knob dict every widget can show, or ConfigError with one clear line."""
    c = DecodeConfig.from_dict(cfg)
    full = {name: getattr(c, name) for name in KNOBS}
    problem = next((p for s in KNOB_SPECS if (p := s.widget_problem(full[s.name]))), None)
    if problem:
        raise ConfigError(problem)
    return full


# ---- knobs that do nothing in the chosen mode (greyed on the page, with the reason) ----------
LINK_KNOBS = ("link_rtt_ms", "link_uplink_kbps")
# every knob `inactive` may name; their widgets' ids end in "-<name>" (ui/knobs.py)
GREYABLE = ("tree_branch", "tree_nodes", "rank_threshold", "entropy_unit", "seed", "min_new_tokens",
            "verify_every") + LINK_KNOBS
# a greyed knob looks it, its label included (only its own block: never the accordion around it)
INACTIVE_CSS = ", ".join(f'[id$="-{n}"]:has(input:disabled), [id$="-{n}-off"]:has(input:disabled)'
                         for n in GREYABLE) + " { opacity: .5; }\n"


def inactive(cfg: dict, remote: bool = False) -> dict[str, str]:
    """{knob: why it has no effect} at `cfg`; `remote`: a cloud server, whose link is measured."""
    out = {n: "a cloud server's link is measured, not modelled" for n in LINK_KNOBS if remote}
    if cfg.get("draft_tree", "chain") == "chain":
        out.update(tree_branch="only for a static or dynamic draft tree",
                   tree_nodes="only for a static or dynamic draft tree")
    if cfg.get("verify", "greedy") != "rank":
        out["rank_threshold"] = "only for the rank acceptance rule"
    if not cfg.get("temperature") and cfg.get("cycle_action", "warn") != "resample":
        out["seed"] = "nothing is random at temperature 0"
    if cfg.get("stop_at_first_sentence", True) is False:
        out["min_new_tokens"] = "it only delays the first-sentence stop, which is off"
    if cfg.get("entropy_threshold") is None:
        out.update(entropy_unit="only with an entropy threshold",
                   verify_every="only with an entropy threshold")
    return out
