import json
import math

import pytest

from specdec_core.decoding.config import PRESETS, DecodeConfig, preset
from specdec_core.errors import ConfigError


def test_defaults_match_design_table():
    c = DecodeConfig()
    assert (c.k, c.verify, c.rank_threshold, c.entropy_threshold, c.verify_every) == (4, "greedy", 5, None, None)
    assert c.cadence == 4
    assert (c.temperature, c.max_new_tokens, c.min_new_tokens, c.stop_at_first_sentence) == (0.0, 128, 16, True)
    assert (c.prompt_type, c.comma_gate, c.period_gate, c.ban_adjacent_repeat) == ("detailed", 0, 0, False)
    assert (c.no_repeat_ngram, c.repetition_penalty, c.cycle_action, c.seed, c.faults) == (0, 1.0, "warn", 0, [])


def test_json_round_trip_including_infinity():
    c = DecodeConfig(k=6, verify="rank", entropy_threshold=math.inf, faults=["no_resync"], comma_gate=4)
    text = c.to_json()
    json.loads(text)  # standard JSON (no Infinity literal)
    assert DecodeConfig.from_json(text) == c


@pytest.mark.parametrize("knob,value,needle", [
    ("k", 0, "k must be in [1, 32]"),
    ("k", 2.5, "k must be an integer"),
    ("verify", "fast", "verify must be one of greedy, sampling, rank"),
    ("temperature", -1, "temperature must be in"),
    ("temperature", float("nan"), "temperature must be a finite number"),
    ("entropy_threshold", -0.5, "entropy_threshold must be in"),
    ("no_repeat_ngram", 1, "no_repeat_ngram must be 0 (off) or between 2 and 8"),
    ("repetition_penalty", 0.5, "repetition_penalty must be in [1.0, 10.0]"),
    ("cycle_action", "explode", "cycle_action must be one of warn, resample, stop"),
    ("prompt_type", "long", "prompt_type must be one of detailed, concise"),
    ("faults", ["nope"], "unknown fault 'nope'"),
    ("stop_at_first_sentence", "maybe", "stop_at_first_sentence: cannot read"),
])
def test_bad_values_are_refused_with_the_knob_named(knob, value, needle):
    with pytest.raises(ConfigError) as e:
        DecodeConfig.from_dict({knob: value})
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_unknown_knob_and_string_coercion():
    with pytest.raises(ConfigError, match="unknown knob"):
        DecodeConfig.from_dict({"kk": 3})
    c = DecodeConfig.from_dict({"k": "6", "entropy_threshold": "off", "ban_adjacent_repeat": "true",
                                "temperature": "0.7", "faults": "no_resync,mask_1x1"})
    assert (c.k, c.entropy_threshold, c.ban_adjacent_repeat, c.temperature) == (6, None, True, 0.7)
    assert c.faults == ["no_resync", "mask_1x1"]


def test_presets_are_valid_and_named_from_the_notes():
    for name in PRESETS:
        preset(name)
    # the notes' nats were tuned on Qwen's 151,936 ids; the presets keep them as fractions of ln|V|
    qwen = math.log(151_936)
    ff, qf = preset("fluency_first"), preset("quality_first")
    assert ff.k == 4 and ff.entropy_unit == "frac" and 5.5 <= ff.threshold_nats(151_936) <= 6.0
    assert qf.k == 6 and qf.entropy_unit == "frac" and 3.0 <= qf.threshold_nats(151_936) <= 3.5
    assert ff.entropy_threshold == round(5.75 / qwen, 3) == 0.482
    s0 = preset("seed000_fixed")
    assert s0.verify == "rank" and 3 <= s0.rank_threshold <= 5 and s0.cadence == 5
    with pytest.raises(ConfigError):
        preset("turbo")
