"""A knob panel: one widget per DecodeConfig knob, built from its schema entry (components.config_panel),
read and written through `to_config` / `updates_for` by the Live tab and both A/B sides. A nullable
knob is an "off" checkbox plus a slider; a knob whose unit another knob picks follows that unit."""
from __future__ import annotations

import gradio as gr

from components.config_panel import GREYABLE as PANEL_GREYABLE, LINK_KNOBS
from components.config_panel import (KNOB_SPECS, SPECS_BY_NAME, UNIT_KNOBS, default_config, inactive,
                                     widget_settings, widget_value)
from components.formatting import fault_label, plain, snake_words, words
from specdec_core.decoding.config import PRESET_HELP, PRESETS
from specdec_core.decoding.faults import FAULTS

CUSTOM = "custom"
# A nullable knob whose "off" means "the value of another knob" shows that value, greyed out
# ("verify every: = k" shows k); any other nullable knob hides its slider while off, so a greyed
# number never contradicts the "off" label.
FOLLOWS = {"verify_every": "k"}
# Widgets per group, in display order; prompt_type lives with the clip inputs, not here.
LAYOUT = [
    ("Draft & verify", True, ["k", "drafter", "draft_tree", "tree_branch", "tree_nodes", "verify", "rank_threshold", "entropy_threshold", "entropy_unit",
                              "verify_every", "temperature"]),
    ("Stopping & cycles", False, ["max_new_tokens", "min_new_tokens", "stop_at_first_sentence",
                                  "cycle_action", "time_limit_s", "seed", "cache_check_every", "engine"]),
    ("Draft gates (source note 001)", False, ["comma_gate", "period_gate", "ban_adjacent_repeat",
                                       "no_repeat_ngram", "repetition_penalty"]),
    ("Link model (what-if, local cloud)", False, ["link_rtt_ms", "link_uplink_kbps"]),
]


def preset_choices() -> list[tuple[str, str]]:
    return [("custom (keep knobs)", CUSTOM)] + [(plain(words(n)), n) for n in PRESETS]


PRESET_INFO = "fills the knobs below from the source notes"


def preset_info(name: str) -> str:
    """The preset dropdown's help: what the picked preset sets (its name alone fits the box)."""
    return plain(PRESET_HELP[name]) if name in PRESET_HELP else PRESET_INFO


def fault_choices() -> list[tuple[str, str]]:
    """'no resync — the bug; seen here: ... (source note ...)': each fault's own text, in words."""
    return [(f"{fault_label(f.name)} — {snake_words(f.text)} (source note {f.seed})", f.name)
            for f in FAULTS.values()]


def preset_config(name: str, keep: dict | None = None) -> dict:
    """Defaults + the preset; keeps the clip-side knobs (prompt type, length caps) of `keep`."""
    cfg = default_config()
    if keep:
        for k in ("prompt_type", "max_new_tokens", "seed"):
            if k in keep:
                cfg[k] = keep[k]
    if name in PRESETS:
        cfg.update(PRESETS[name])
    return cfg


def _settings(name: str, cfg: dict) -> dict:
    """widget_settings with the label in words."""
    out = widget_settings(name, cfg)
    return {**out, "label": plain(out["label"])}


# The knobs whose values decide whether another knob does anything (config_panel.inactive)
MODE_KNOBS = ("draft_tree", "verify", "temperature", "cycle_action", "stop_at_first_sentence")
GREYABLE = tuple(n for n in PANEL_GREYABLE if n not in LINK_KNOBS)   # link knobs: the cloud URL (ui/live.py)


class KnobPanel:
    """Builds the widgets inside the current Blocks context; `inputs` is the flat widget list."""

    def __init__(self, side: str = "", *, prompt_type_widget: gr.components.Component,
                 open_first: bool = True, id_prefix: str = ""):
        """`prompt_type_widget`: the tab's prompt type picker (it sits with the clip inputs)."""
        self.prefix = id_prefix or (side.lower() or "knob")
        self.widgets: dict[str, gr.components.Component] = {}
        self.off: dict[str, gr.Checkbox] = {}
        suffix = f" ({side})" if side else ""
        self.preset = gr.Dropdown(preset_choices(), value=CUSTOM, label="preset" + suffix,
                                  info=PRESET_INFO,
                                  elem_classes="ss-preset")
        for title, is_open, names in LAYOUT:
            with gr.Accordion(title + suffix, open=is_open and open_first):
                for name in names:
                    self._widget(SPECS_BY_NAME[name])
        with gr.Accordion("Faults (bug zoo)" + suffix, open=False):
            self.widgets["faults"] = gr.CheckboxGroup(
                fault_choices(), value=[], label="faults", show_label=False,
                info="re-create a bug from the source notes to see its symptom",
                elem_classes="ss-faults")
        self.widgets["prompt_type"] = prompt_type_widget
        self.names = [s.name for s in KNOB_SPECS if s.name in self.widgets]
        self.inputs = [self.widgets[n] for n in self.names] + [self.off[n] for n in self.off]
        for name, box in self.off.items():
            lead = self.widgets.get(FOLLOWS.get(name, ""))
            if lead is not None:
                box.change(lambda off, v: gr.update(interactive=not off, value=v) if off
                           else gr.update(interactive=True), [box, lead], self.widgets[name],
                           queue=False, api_visibility="private")
                lead.change(lambda v, off: gr.update(value=v) if off else gr.skip(), [lead, box],
                            self.widgets[name], queue=False, api_visibility="private")
            else:
                box.change(lambda off: gr.update(interactive=not off, visible=not off), box,
                           self.widgets[name], queue=False, api_visibility="private")
        self._wire_inactive()
        self.preset.input(self._apply_preset, [self.preset, *self.inputs], [self.preset, *self.inputs],
                          queue=False, api_visibility="private")
        for unit, names in UNIT_KNOBS.items():
            for name in names:
                if unit in self.widgets and name in self.widgets:
                    self.widgets[unit].input(self._unit_switch(unit, name),
                                             [self.widgets[unit], self.widgets[name]],
                                             self.widgets[name], queue=False,
                                             api_visibility="private")

    def _wire_inactive(self) -> None:
        """Knobs that do nothing in the chosen mode (config_panel.inactive) greyed, their help saying why."""
        ins = [self.widgets[n] for n in MODE_KNOBS] + [self.off["entropy_threshold"], self.off["verify_every"]]
        outs = [self.widgets[n] for n in GREYABLE] + [self.off["verify_every"]]

        def grey(*values):
            *modes, no_threshold, every_off = values
            why = inactive({**dict(zip(MODE_KNOBS, modes)), "entropy_threshold": None if no_threshold else 1.0})
            ups = [greyed(n, why.get(n)) for n in GREYABLE]
            if "verify_every" not in why:   # its slider follows its own "= k" box
                ups[GREYABLE.index("verify_every")] = gr.update(
                    interactive=not every_off, info=plain(SPECS_BY_NAME["verify_every"].help))
            return ups + [gr.update(interactive="verify_every" not in why)]
        for box in ins:
            box.change(grey, ins, outs, queue=False, api_visibility="private")

    @staticmethod
    def _unit_switch(unit: str, name: str):
        """The unit picker changed: the knob's widget takes that unit's range and label."""
        def switch(picked, value):
            cfg = {unit: picked}
            return gr.update(value=widget_value(name, cfg, value), **_settings(name, cfg))
        return switch

    def _widget(self, spec) -> None:
        label, info = plain(spec.label), plain(spec.help)
        why = inactive(default_config()).get(spec.name)    # greyed from the start, with the reason
        if spec.nullable:
            with gr.Group():
                self.off[spec.name] = gr.Checkbox(value=spec.default is None, label=spec.off_label,
                                                  elem_classes="ss-off",
                                                  elem_id=f"{self.prefix}-{spec.name}-off")
                mid = spec.start if spec.start is not None else spec.minimum
                lead = FOLLOWS.get(spec.name)
                if lead and spec.default is None:
                    mid = SPECS_BY_NAME[lead].default
                self.widgets[spec.name] = gr.Slider(spec.minimum, spec.maximum, value=mid,
                                                    step=spec.step, label=label, info=info,
                                                    interactive=spec.default is not None,
                                                    visible=spec.default is not None or bool(lead),
                                                    elem_id=f"{self.prefix}-{spec.name}")
                if why:
                    self.off[spec.name].interactive = False
                    self.widgets[spec.name].info = _greyed_info(spec.name, why)
            return
        eid = f"{self.prefix}-{spec.name}"
        if spec.kind == "slider":
            w = gr.Slider(spec.minimum, spec.maximum, value=spec.default, step=spec.step,
                          label=label, info=info, elem_id=eid)
        elif spec.kind == "number":
            w = gr.Number(value=spec.default, minimum=spec.minimum, maximum=spec.maximum,
                          step=spec.step, precision=0 if spec.integer else None, label=label,
                          info=info, elem_id=eid)
        elif spec.kind == "checkbox":
            w = gr.Checkbox(value=spec.default, label=label, info=info, elem_id=eid)
        else:
            w = gr.Dropdown(list(spec.choices), value=spec.default, label=label, info=info, elem_id=eid)
        if why:
            w.interactive, w.info = False, _greyed_info(spec.name, why)
        self.widgets[spec.name] = w

    # ---- values <-> config dict ------------------------------------------------------------
    def to_config(self, values) -> dict:
        """Widget values (in `inputs` order) -> knob dict for DecodeConfig.from_dict."""
        offs = dict(zip(self.off, values[len(self.names):]))
        cfg = {}
        for name, v in zip(self.names, values):
            if offs.get(name):
                v = None
            elif SPECS_BY_NAME[name].integer and isinstance(v, float) and v.is_integer():
                v = int(v)
            cfg[name] = list(v or []) if name == "faults" else v
        return cfg

    def updates_for(self, cfg: dict) -> list:
        """Knob dict -> one gr.update per widget of `inputs`."""
        out = []
        for name in self.names:
            v = cfg.get(name, SPECS_BY_NAME[name].default)
            unit = {}
            if SPECS_BY_NAME[name].unit_knob:   # the range of the unit cfg picks
                unit = _settings(name, cfg)
                if v is None:
                    unit["value"] = widget_value(name, cfg, None)
            if name in self.off and v is None:
                lead = FOLLOWS.get(name)
                shown = {"value": cfg.get(lead, SPECS_BY_NAME[lead].default)} if lead else {"visible": False}
                out.append(gr.update(interactive=False, **{**unit, **shown}))
            elif name in self.off:
                out.append(gr.update(value=v, interactive=True, visible=True, **unit))
            else:
                out.append(gr.update(value=list(v) if name == "faults" else v))
        out += [gr.update(value=cfg.get(name) is None) for name in self.off]
        return out

    def _apply_preset(self, name, *values):
        """The preset's help in its box, and the knobs it sets (custom keeps them)."""
        info = gr.update(info=preset_info(name))
        if name == CUSTOM:
            return [info] + [gr.skip()] * len(self.inputs)
        return [info, *self.updates_for(preset_config(name, keep=self.to_config(values)))]


def _greyed_info(name: str, why: str) -> str:
    return f"no effect now: {why}. " + plain(SPECS_BY_NAME[name].help)


def greyed(name: str, why: str | None):
    """The update of a knob that does nothing now (why) or applies again (None)."""
    if why:
        return gr.update(interactive=False, info=_greyed_info(name, why))
    return gr.update(interactive=True, info=plain(SPECS_BY_NAME[name].help))
