"""Issue 37, A/B and Batch: a difference is called better only beyond the measured noise, the
A/B table shows only rows that apply, A's and B's cards stay in line, one-click pairs (chain vs
tree, edge vs head drafter); Batch writes a share one way, names the prompt type and chrF's
scale, keeps the by-label table in its box and shows Ray workers only for Ray."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from components.batch_view import aggregate_frame, label_matrix_html, results_table
from components.compare import IDENTICAL, REPEATS, metric_diff_html, noise_verdict, vs_cloud_html
from components.formatting import fmt
from specdec_core import DecodeConfig
from specdec_core.api import load_backend, prepare, run_clip
from specdec_core.evaluation.batch.checklist import checklist

CLIP = str(Path(__file__).resolve().parents[1] / "sample_audio" / "sad_01.wav")
SHARE = re.compile(r"^\d+\.\d%$")       # how every share is written: 65.7%


def _better(html: str) -> dict:
    return dict(re.findall(r'data-key="(\w+)" data-better="([AB=]?)"', html))


def _cells(html: str) -> dict:
    return dict(re.findall(r'data-key="(\w+)".*?class="ss-ab-better[^"]*"[^>]*>([^<]*)</td>', html))


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


@pytest.fixture(scope="module")
def pair(demo):
    """Two decodes of one clip with one and the same configuration."""
    return [run_clip(demo, CLIP, DecodeConfig()) for _ in range(2)]


# --- A/B: noise -------------------------------------------------------------------------------

def test_a_timing_is_better_only_beyond_the_measured_spread():
    # the case: B faster in decode time, A faster in wall time, from noise alone
    win, why = noise_verdict("decode_s", [0.30, 0.41, 0.35], [0.33, 0.29, 0.38])
    assert win == "=" and why.startswith("within noise") and "3 and 3 repeats" in why
    win, why = noise_verdict("decode_s", [0.30, 0.31, 0.30], [0.50, 0.52, 0.51])
    assert win == "A" and "beyond the noise" in why
    assert noise_verdict("tokens_per_s", [100, 101, 99], [150, 151, 149])[0] == "B"
    # the medians differ by less than 1.5x the larger spread: not called, even without overlap
    assert noise_verdict("decode_s", [0.30, 0.33, 0.36], [0.37, 0.41, 0.45])[0] == "="


def test_identical_configs_name_no_winner_on_real_decodes(pair):
    a, b = (r["metrics"] for r in pair)
    # one timing per side differs from the other by chance; identical configs name no winner
    timings = {"decode_s": ([0.2, 0.5, 0.3], [0.21, 0.19, 0.22])}
    html = metric_diff_html(a, b, True, "detailed", extra=[("decode_s", 0.3, 0.21)], timings=timings,
                            identical=True)
    assert set(_better(html).values()) <= {"=", ""}, _better(html)
    assert IDENTICAL in html
    cells = _cells(html)
    # deterministic quantities (greedy) are equal: "same", not "tie" and not a winner
    for key in ("acceptance_rate", "cloud_calls", "new_tokens", "mean_accepted_length", "hanzi_count"):
        assert cells[key] == "same", (key, cells[key])
    assert cells["decode_s"] == "within noise"


def test_repeats_feed_the_speed_rows_and_the_speedup(demo):
    from ui.ab import busy_line, side_speedups, time_repeats, timing_rows

    class R:     # the two sides as the A/B tab's Run objects carry them
        def __init__(self, cfg):
            self.backend, self.cfg, self.stopped = demo, cfg, False
            self.prompt = prepare(demo, CLIP, cfg)
            self.live = type("L", (), {"trace": {"token_ids": [1], "metrics": {"new_tokens": 1, "cloud_calls": 1}}})

    runs = [R(DecodeConfig()), R(DecodeConfig(k=2))]
    bases = [{"token_ids": [1]}, {"token_ids": [2]}]       # B's output differs from cloud-only
    decode, cloud = time_repeats(runs, "test-session", bases)
    assert [len(s) for s in decode] == [REPEATS, REPEATS] and all(x > 0 for s in decode for x in s)
    assert cloud[0] is cloud[1] and len(cloud[0]) == REPEATS      # one shared cloud-only side, timed in turn
    sps = side_speedups(runs, bases, (decode, cloud))
    assert not sps[0]["lossy"] and sps[1]["lossy"]
    rows, timings = timing_rows(sps, decode)
    if busy_line(sps, decode):            # issue 50: a busy machine's repeats time nothing
        assert rows == [] and timings == {} and "bench" in busy_line(sps, decode)
        return
    assert set(timings) == {"decode_s", "speedup", "cloud_only_s"}
    assert [k for k, *_ in rows] == ["decode_s", "speedup", "cloud_only_s"]
    assert dict((k, (a, b)) for k, a, b in rows)["decode_s"] == (sps[0]["decode_s"], sps[1]["decode_s"])
    assert str(dict((k, (a, b)) for k, a, b in rows)["speedup"][1]).startswith("different output")
    assert "median of 3 quiet repeats" in vs_cloud_html("a", "a", sps[0])
    html = metric_diff_html({"link": "none"}, {"link": "none"}, True, extra=rows, timings=timings)
    assert "median of 3 quiet repeats per side" in html and "over 3 repeats (median shown)" in html


def test_the_live_tab_times_one_run_on_the_same_path(demo):
    """Live's speed-up over cloud-only (issue 43) is A/B's timing path with one run: its decode
    and its cloud-only repeats interleaved, one speed-up, lossless when the tokens match."""
    from ui.runs import side_speedups, time_repeats

    run = type("R", (), {"backend": demo, "cfg": DecodeConfig(), "stopped": False,
                         "prompt": prepare(demo, CLIP, DecodeConfig()),
                         "live": type("L", (), {"trace": {"token_ids": [1], "metrics": {"new_tokens": 1,
                                                                                         "cloud_calls": 1}}})})
    decode, cloud = time_repeats([run], "test-session", [{"token_ids": [1]}])
    assert len(decode) == len(cloud) == 1 and len(decode[0]) == len(cloud[0]) == REPEATS
    [sp] = side_speedups([run], [{"token_ids": [1]}], (decode, cloud))
    assert sp["decode_samples"] == decode[0] and sp["cloud_samples"] == cloud[0] and not sp["lossy"]
    assert time_repeats([run], "test-session", [None]) is not None              # no reference: decode only
    assert side_speedups([run], [None], None) == [None]


# --- A/B: rows that apply -------------------------------------------------------------------

def test_table_shows_only_rows_that_apply(pair):
    a, b = (r["metrics"] for r in pair)
    assert a["link"] == "none"
    html = metric_diff_html(a, b, True, "detailed", extra=[("decode_s", 0.3, 0.3)])
    keys = re.findall(r'<tr data-key="(\w+)"', html)
    for key in ("link_s", "e2e_s", "bytes_up", "bytes_per_call", "uplink_calls", "ttft_s",  # no link
                "cache_desyncs", "cycles", "draft_only_tokens",                            # all zero
                "wall_s", "tokens_per_s",            # the streamed run's, with drawing: decode time instead
                "char_count", "repeat_rate_2", "bonus_tokens"):                            # internals
        assert key not in keys, key
    assert len(keys) <= 22, keys
    assert re.findall(r'data-group="(\w+)"', html) == ["speed", "text", "draft"]
    linked = metric_diff_html(dict(a, link="modelled", link_s=0.4), dict(b, link="modelled", link_s=0.4), True)
    assert 'data-group="link"' in linked and 'data-key="link_s"' in linked
    busy = metric_diff_html(a, b, True, "detailed")    # a busy machine: no timing rows passed in
    assert not {"wall_s", "tokens_per_s", "decode_s"} & set(re.findall(r'<tr data-key="(\w+)"', busy))
    assert 'data-group="speed"' not in busy
    desync = metric_diff_html(a, dict(b, cache_desyncs=3), True)
    assert re.search(r'data-key="cache_desyncs" data-better="A"', desync)


# --- Batch -------------------------------------------------------------------------------------

def _batch_row(name, acc, prompt_type=None, cfg_prompt="detailed"):
    return {"name": name, "config": "A", "ok": True, "label": "sad", "prompt_type": prompt_type,
            "metrics": {"acceptance_rate": acc, "hanzi_count": 40, "punct_density": 0.14,
                        "mean_accepted_length": 3.5, "cloud_call_rate": 1.0, "cloud_calls": 12,
                        "repeat_rate": 0.0, "adjacent_repeats": 0, "ended_by": "eos", "new_tokens": 40},
            "scores": {"chrf": 21.3}, "trace": {"config": {"prompt_type": cfg_prompt}}}


def test_batch_writes_acceptance_one_way_everywhere():
    rows = [_batch_row("a", 0.65714), _batch_row("b", 0.7, prompt_type="concise")]
    table = results_table(rows)
    assert list(table["acceptance"]) == [fmt("acceptance_rate", 0.65714), "70.0%"] == ["65.7%", "70.0%"]
    # the prompt type beside the length band: the clip's, else the run's configuration
    cols = list(table.columns)
    assert cols[cols.index("汉字") - 1] == "prompt type" and list(table["prompt type"]) == ["detailed", "concise"]
    assert "chrF (0–100)" in cols
    by_label = {"sad": {"configs": {"A": {"clips": 2, "acceptance_rate": 0.652, "audio_acceptance_rate": 0.7481,
                                          "other_acceptance_rate": 0.5, "mean_accepted_length": 3.5,
                                          "cloud_calls_per_token": 0.29}}}}
    cells = re.findall(r'<td class="ss-share">([^<]*)</td>', label_matrix_html(by_label))
    assert cells[0] == "65.2%" and cells[2:4] == ["74.8%", "50.0%"], cells
    items = {it["name"]: it for it in checklist(rows)}
    assert items["acceptance rate"]["value"] == "mean 67.9%" and items["acceptance rate"]["target"].startswith("> 60%")
    assert "100.0% of rounds" in items["cloud call rate"]["value"]


def test_batch_aggregate_shares_and_chrf_scale():
    class Result:
        summary = {"A": {"mean": {"acceptance_rate": 0.65714, "cloud_call_rate": 1.0},
                         "chrf_mean": 21.3, "per_label_accuracy": {"sad": 0.5}, "emotion_accuracy": 0.5}}

    df = aggregate_frame(Result()).set_index("figure")["config A"]
    shares = [v for t, v in df.items() if "acceptance rate" in t or "call rate" in t or t == "emotion accuracy"]
    assert shares and all(SHARE.match(v) for v in shares), shares
    assert df["per-label accuracy"] == "sad 50.0%"
    assert any("0–100" in t for t in df.index if t.startswith("chrF"))
