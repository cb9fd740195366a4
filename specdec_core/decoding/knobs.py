"""The knob schema: one `Knob` per DecodeConfig field, carried as dataclass field metadata.
Validation, the `--set KEY=VALUE` parser, share links, JSON loading and the UI's widgets all
derive from it, so a range exists in exactly one place."""
from __future__ import annotations

import dataclasses
import importlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

from specdec_core.errors import ConfigError

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_NULL = ("", "off", "none", "null")
_INF = ("inf", "+inf", "infinity")


def short(value, limit: int = 60) -> str:
    """repr() of a user value, cut to one short line for a message."""
    text = repr(value).replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


class LazyNames(Sequence):
    """Choices read from `module.attribute` on first use (fault names: importing them loads torch)."""

    def __init__(self, module: str, attribute: str):
        self._where, self._names = (module, attribute), None

    def _load(self) -> tuple:
        if self._names is None:
            self._names = tuple(getattr(importlib.import_module(self._where[0]), self._where[1]))
        return self._names

    def __getitem__(self, i):
        return self._load()[i]

    def __len__(self):
        return len(self._load())

    def __repr__(self):
        return f"LazyNames({'.'.join(self._where)})"


@dataclass(frozen=True)
class Unit:
    """One unit a knob's value can be given in; another knob (`Knob.unit_knob`) picks which.
    Its range, step and label replace the knob's own while it is picked (the first unit of a
    knob is its default, and the knob's own range is that unit's)."""
    name: str
    minimum: float
    maximum: float
    step: float
    label: str
    note: str = ""                  # after the range in messages, e.g. "nats or inf"
    allow_inf: bool = False
    start: float | None = None      # where a slider sits when the knob is switched on


@dataclass(frozen=True)
class Knob:
    type: str                       # int | float | bool | choice | faults
    default: object = None
    minimum: float | None = None
    maximum: float | None = None
    step: float | None = None
    label: str = ""
    help: str = ""
    group: str = "run"              # draft | verify | stop | gates | run | checks
    kind: str = ""                  # widget: slider | number | checkbox | dropdown | multiselect
    choices: tuple = ()
    nullable: bool = False          # None is legal, shown as `off_label`
    null_words: tuple = _NULL       # string forms of None
    off_label: str = ""
    allow_inf: bool = False         # +inf is legal (entropy_threshold: never call the cloud)
    exclude: tuple = ()             # values refused inside the range, with `exclude_msg`
    exclude_msg: str = ""
    units: tuple = ()               # Unit entries; the knob named `unit_knob` picks one
    unit_knob: str = ""
    note: str = ""                  # after the range in messages (the picked unit's note)
    start: float | None = None      # slider position when a nullable knob is switched on
    design: bool = True             # a knob of the design table (shared/design.md)
    name: str = ""                  # filled in by `schema()`

    @property
    def integer(self) -> bool:
        return self.type == "int"

    def options(self) -> tuple:
        """Legal choices of a choice/faults knob."""
        return tuple(self.choices)

    # ---- units ------------------------------------------------------------------------------
    def resolve(self, values) -> "Knob":
        """This knob as the other knob values in `values` (a mapping) say to read it: with the
        range, step and label of the unit its unit knob picks (itself for an unknown unit: the
        unit knob's own check refuses that)."""
        if not self.unit_knob:
            return self
        name = values.get(self.unit_knob, self.units[0].name if self.units else None)
        u = next((u for u in self.units if u.name == name), None)
        return self if u is None else dataclasses.replace(self, **_unit_fields(u, self.unit_knob))

    # ---- string forms -> typed values (CLI --set, share links, JSON strings) --------------
    def parse(self, raw):
        if not isinstance(raw, str):
            return raw
        s = raw.strip()
        low = s.lower()
        if self.nullable and low in self.null_words:
            return None
        if self.type == "faults":
            return [f for f in s.replace(",", " ").split() if f]
        if self.type == "choice":
            return s
        if self.allow_inf and low in _INF:
            return math.inf
        try:
            if self.type == "bool":
                if low in _TRUE:
                    return True
                if low in _FALSE:
                    return False
                raise ValueError
            if self.type == "int":
                return int(s)
            return float(s)
        except ValueError:
            raise ConfigError(f"{self.name}: cannot read {short(raw)} as {self.type}") from None

    # ---- typed value -> checked, normalised value -----------------------------------------
    def check(self, v):
        if v is None and self.nullable:
            return None
        if self.type == "int":
            v = self._int(v)
        elif self.type == "float":
            v = self._float(v)
        elif self.type == "bool":
            if not isinstance(v, bool):
                raise ConfigError(f"{self.name} must be true or false, got {short(v)}")
        elif self.type == "choice":
            if not isinstance(v, str) or v not in self.choices:
                raise ConfigError(f"{self.name} must be one of {', '.join(self.choices)}, got {short(v)}")
        elif self.type == "faults":
            v = self._names(v)
        if v in self.exclude and not isinstance(v, bool):
            raise ConfigError(self.exclude_msg or f"{self.name} cannot be {v}")
        return v

    def _int(self, v) -> int:
        lo, hi = int(self.minimum), int(self.maximum)
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ConfigError(f"{self.name} must be an integer in [{lo}, {hi}], got {short(v)}")
        if not lo <= v <= hi:
            raise ConfigError(f"{self.name} must be in [{lo}, {hi}]{self.note}, got {v}")
        return v

    def _float(self, v) -> float:
        lo, hi = float(self.minimum), float(self.maximum)
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ConfigError(f"{self.name} must be a number in [{lo}, {hi}]{self.note}, got {short(v)}")
        v = float(v)
        if math.isnan(v) or (math.isinf(v) and not (self.allow_inf and v > 0)):
            raise ConfigError(f"{self.name} must be a finite number in [{lo}, {hi}]{self.note}, got {v}")
        if not math.isinf(v) and not lo <= v <= hi:
            raise ConfigError(f"{self.name} must be in [{lo}, {hi}]{self.note}, got {v}")
        return v

    def _names(self, v) -> list[str]:
        if isinstance(v, str):
            v = self.parse(v)
        if not isinstance(v, (list, tuple)) or not all(isinstance(n, str) for n in v):
            raise ConfigError(f"{self.name} must be a list of fault names, got {short(v)}")
        known = self.options()
        for n in v:
            if n not in known:
                raise ConfigError(f"unknown fault {short(n, 40)} in {self.name}; choose from {', '.join(known)}")
        return list(dict.fromkeys(v))

    # ---- share links ------------------------------------------------------------------------
    def encode(self, v) -> str:
        if v is None:
            return "off"
        if isinstance(v, bool):
            return "1" if v else "0"
        if self.type == "faults":
            return ",".join(v)
        if isinstance(v, float) and math.isinf(v):
            return "inf"
        if self.integer and isinstance(v, float) and v.is_integer():
            return str(int(v))
        return repr(v) if isinstance(v, float) else str(v)

    def widget_problem(self, v) -> str | None:
        """Why a valid value cannot be shown on this knob's widget (None when it can)."""
        if isinstance(v, float) and math.isinf(v):
            return (f"{self.name}=inf (never call the cloud) has no slider position; "
                    f"use a value in [{self.minimum}, {self.maximum}] or set it through the API/CLI")
        return None


def _unit_fields(u: Unit, unit_knob: str) -> dict:
    """The Knob fields that unit `u` sets."""
    return {"minimum": u.minimum, "maximum": u.maximum, "step": u.step, "label": u.label,
            "allow_inf": u.allow_inf, "start": u.start,
            "note": f" {u.note} ({unit_knob}={u.name})" if u.note else ""}


def knob(type_: str, default, **kw):
    """A dataclass field whose metadata is its Knob. With `units`, the knob's own range, step
    and label are those of its first (default) unit."""
    if kw.get("units"):
        kw = {**_unit_fields(kw["units"][0], kw.get("unit_knob", "")), **kw}
    spec = Knob(type_, default, **kw)
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata={"knob": spec})
    return dataclasses.field(default=default, metadata={"knob": spec})


def schema(cls) -> dict[str, Knob]:
    """name -> Knob, in field order, from a dataclass built with `knob()` fields."""
    return {f.name: dataclasses.replace(f.metadata["knob"], name=f.name)
            for f in dataclasses.fields(cls) if "knob" in f.metadata}
