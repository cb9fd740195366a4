"""A/B of a fault against the fixed decoder through the diff table the A/B tab shows, and the
cycle actions on a prompt where the edge alone loops."""
from __future__ import annotations

from pathlib import Path

import pytest

from components.compare import metric_diff_table
from specdec_core import DecodeConfig
from specdec_core.api import load_backend, run_clip
from specdec_core.audio import conditions as C
from specdec_core.recorder.driver.builtin import judged_run

SAMPLES = Path(__file__).resolve().parents[1] / "sample_audio"


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


def _row(table, metric):
    return table.set_index("metric").loc[metric]


@pytest.mark.parametrize("fault,metric", [("no_resync", "cache_desyncs"),
                                          ("input_corruption", "repeat_rate"),
                                          ("mask_1x1", "acceptance_rate")])
def test_fault_vs_fixed_diff_table_moves_the_symptom_metric(demo, fault, metric):
    clip = str(SAMPLES / "angry_01.wav")
    a = run_clip(demo, clip, DecodeConfig())["metrics"]
    b = run_clip(demo, clip, DecodeConfig(faults=[fault]))["metrics"]
    row = _row(metric_diff_table(a, b), metric)
    assert row["better"] == "A", (fault, row.to_dict())     # the fixed side wins
    worse = b[metric] < a[metric] if metric == "acceptance_rate" else b[metric] > a[metric]
    assert worse


# The one-layer edge alone loops on 7 of the 486 cue-combination x prompt-type prompts (none
# of them a shipped clip's); on this one: "说话人音调适中，音调适中，音调适中，话语连贯，…".
LOOP_BINS = {"pitch": "mid", "pvar": "mid", "energy": "low", "rate": "mid", "pause": "few"}
EDGE = {"entropy_threshold": "inf"}


def run_looping(demo, cfg: DecodeConfig) -> dict:
    prompt = demo.build_inputs_from_tokens(C.condition_tokens(LOOP_BINS), "detailed")
    tr = judged_run(demo, prompt, cfg)     # the built-in decoder, judged by the one check list
    return {"trace": tr.to_dict(), "metrics": tr.metrics, "token_ids": tr.token_ids}


def test_cycle_warn_marks_the_cycle(demo):
    r = run_looping(demo, DecodeConfig.from_dict({**EDGE, "cycle_action": "warn"}))
    tr = r["trace"]
    (c,) = tr["cycles"]
    loop = "音调适中，"
    assert c["period"] == 5 and c["text"] in {loop[i:] + loop[:i] for i in range(5)}
    flagged = [t["i"] for t in tr["tokens"] if t["cycle"]]
    assert flagged == list(range(c["start"], c["end"]))
    assert any(w["kind"] == "cycle" for w in tr["warnings"])
    assert "cycle" in {d["code"] for d in tr["diagnostics"]}
    assert r["metrics"]["ended_by"] == "sentence"


def test_cycle_stop_ends_the_run(demo):
    warn = run_looping(demo, DecodeConfig.from_dict({**EDGE, "cycle_action": "warn"}))
    stop = run_looping(demo, DecodeConfig.from_dict({**EDGE, "cycle_action": "stop"}))
    assert stop["metrics"]["ended_by"] == "cycle"
    c = warn["trace"]["cycles"][0]
    # it stops the moment the cycle is detected (3 full periods), not at its end
    assert len(stop["token_ids"]) == c["start"] + 3 * c["period"]
    assert stop["token_ids"] == warn["token_ids"][: len(stop["token_ids"])]


def test_cycle_resample_breaks_the_loop(demo):
    r = run_looping(demo, DecodeConfig.from_dict({**EDGE, "cycle_action": "resample"}))
    tr = r["trace"]
    assert tr["cycles"] == [] and r["metrics"]["cycles"] == 0
    assert any(w["kind"] == "cycle_resample" for w in tr["warnings"])
    assert r["metrics"]["ended_by"] in ("sentence", "eos")
