"""The operator's caps on a shared server (issue 37): the ONE place that says how much one visitor
may ask for. Each cap has an environment variable (docs/space.md); its defaults are safe for a
small shared machine when the app serves the network (SPACE_ID set, or a non-loopback address)
and generous on loopback, in the library and in the CLI. A knob over its cap is cut to the cap
(`cap_config`); `cut_notes` says which cap ended a run and the variable that raises it."""
from __future__ import annotations

import os
from dataclasses import dataclass

_APP: list[bool] = [False]     # True once the app's page is built in this process


def serve_app() -> None:
    """Called by the app (ui/page.build_demo): the caps' defaults now follow where it serves."""
    _APP[0] = True


def on_network() -> bool:
    """True when this process is the app and it serves beyond loopback: a Space (SPACE_ID), a
    public share link, or a non-loopback address such as app.py's default 0.0.0.0 (the rule of
    backends/cloud_policy.served_locally). The library and the CLI get the loopback defaults."""
    from specdec_core.backends.cloud_policy import served_locally

    return _APP[0] and not served_locally()[0]


@dataclass(frozen=True)
class Cap:
    env: str
    label: str
    unit: str
    network: float
    loopback: float | None    # None: the knob's own maximum (DecodeConfig's schema)
    cast: type = int

    def value(self, knob: str | None = None):
        default = self.network if on_network() else self.loopback
        if default is None:
            from specdec_core.decoding.config import KNOBS
            default = KNOBS[knob].maximum
        raw = (os.environ.get(self.env) or "").strip()
        try:
            return self.cast(raw) if raw else self.cast(default)
        except ValueError:
            return self.cast(default)

    def text(self, value) -> str:
        return f"{value:g}{self.unit}" if value else "none"


CAPS: dict[str, Cap] = {
    "max_new_tokens": Cap("SPECSCOPE_MAX_NEW_TOKENS", "max new tokens", "", 512, None),
    "time_limit_s": Cap("SPECSCOPE_TIME_LIMIT_S", "time limit", " s", 60.0, 0.0, float),
    "runs_per_session": Cap("SPECSCOPE_MAX_QUEUED_PER_SESSION", "runs per session", "", 1, 4),
    "recording_mb": Cap("SPECSCOPE_MAX_RECORDING_MB", "recording size", " MB", 5.0, 20.0, float),
    "recording_forwards": Cap("SPECSCOPE_MAX_RECORDING_FORWARDS", "recording forwards", "", 5000, 20000),
    "recording_ids": Cap("SPECSCOPE_MAX_RECORDING_IDS", "recording ids", "", 100_000, 400_000),
}


def cap(name: str):
    """The cap's value now (environment, else the default for where the app is served)."""
    return CAPS[name].value(name)


def raise_hint(name: str) -> str:
    return f"the operator raises it with {CAPS[name].env}"


def cap_config(cfg):
    """The DecodeConfig with max_new_tokens and time_limit_s cut to their caps (a time limit of
    0, "none", counts as over a cap). A cap of 0 means no cap."""
    changes = {}
    top = cap("max_new_tokens")
    if top > 0 and cfg.max_new_tokens > top:
        changes["max_new_tokens"] = top
    t = cap("time_limit_s")
    if t > 0 and (cfg.time_limit_s == 0 or cfg.time_limit_s > t):
        changes["time_limit_s"] = t
    return cfg.replace(**changes) if changes else cfg


def note_cuts(trace: dict, asked, ran) -> list[dict]:
    """Add to a finished trace's warnings the line for a cap that ended it (replacing the
    decoder's own time-limit line); returns the lines added."""
    notes = cut_notes(asked, ran, trace.get("ended_by"))
    if notes:
        trace["warnings"] = [w for w in trace.get("warnings") or []
                             if w.get("kind") != trace.get("ended_by")] + notes
    return notes


def cut_notes(asked, ran, ended_by: str | None) -> list[dict]:
    """Warnings (trace shape) for a run whose end a cap decided: which cap, its value, the
    variable that raises it. `asked` is the config before cap_config, `ran` after it."""
    out = []
    for knob, end in (("max_new_tokens", "max_tokens"), ("time_limit_s", "time_limit")):
        got, want = getattr(ran, knob), getattr(asked, knob)
        if ended_by == end and got != want:
            c = CAPS[knob]
            out.append({"kind": "server_cap", "message":
                        f"ended by this server's cap on {c.label}: {c.text(got)} per run "
                        f"(asked {c.text(want)}); {raise_hint(knob)}"})
    return out
