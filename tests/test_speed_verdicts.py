"""Issue 55.6 and 58.6-7: one timing loop, one speed-up formula, speed verdicts that never show a
ratio against a cloud-only time the page distrusts, and A/B's cloud-only timing a choice."""
import types
from pathlib import Path

import pytest

from components.cards import metric_cards
from components.compare import speedup_cell, vs_cloud_html
from specdec_core.evaluation.bench import stats
from specdec_core.evaluation.bench.speedup import ordered, speedup_stats
from ui.ab import UNTIMED_WORDS, pair_detail, times_cloud

T = {"tokens": [{}] * 40, "ended_by": "sentence"}


def test_one_timing_loop_interleaves_and_stops():
    calls = []

    def job(name):
        return lambda backend, prompt, cfg: calls.append((name, prompt)) or len(calls)

    times, first = stats.time_jobs(None, ["p", "q"], {"a": (job("a"), None), "b": (job("b"), None, float)}, 2)
    # every prompt by every job before the next prompt; the order turns round each repeat
    assert calls == [("a", "p"), ("b", "p"), ("a", "q"), ("b", "q"),
                     ("b", "p"), ("a", "p"), ("b", "q"), ("a", "q")]
    assert first == {"a": [1, 3], "b": [2, 4]}
    assert times["b"] == [2.0 + 4.0, 5.0 + 7.0]          # a job's own time when it gives one

    def stop(*_):
        raise stats.Stopped
    assert stats.time_jobs(None, [1], {"a": (stop, None)}, 3) is None


def test_one_speedup_formula_for_bench_and_page():
    base, dec = [2.0, 2.2, 1.9], [1.0, 1.1, 0.9]
    x, lo, hi = stats.speedup(base, dec)
    assert (x, lo, hi) == (pytest.approx(2.0), pytest.approx(1.9 / 1.1), pytest.approx(2.2 / 0.9))
    sp = speedup_stats(dec, base)
    assert (sp["speedup"], sp["lo"], sp["hi"]) == (x, lo, hi)                   # the page
    assert stats.ratio(base, dec) == (2.0, [round(lo, 4), round(hi, 4)])        # bench JSON


def test_no_ratio_against_a_cloud_only_time_the_other_side_distrusts():
    """Issue 58.6: k=2 vs k=6, A 2.13 s, B 3.84 s, both over one disturbed cloud-only 10.37 s: A's
    4.87x was hidden as 'timing off' while B's 2.70x was shown green."""
    cloud = [10.37, 10.2, 10.5]
    a = speedup_stats([2.13, 2.1, 2.15], cloud, tokens=40, cloud_calls=12, same_text=True)
    b = speedup_stats([3.84, 3.8, 3.9], cloud, tokens=40, cloud_calls=12, same_text=True)
    assert a["above_bound"] and not b["above_bound"] and b["verdict"] == "faster"
    sa, sb = ordered([a, b])
    detail = pair_detail(T, T, [sa, sb])
    assert "×" not in detail.split("B:")[1] and "cloud-only time both sides share is off" in detail
    card = metric_cards({"new_tokens": 40}, speedup=sb)
    assert "2.70×" not in card and '<div class="ss-card-value">—</div>' in card and "cloud-only time off" in card
    assert speedup_cell(sb) == "not shown (cloud-only time off)"
    html = vs_cloud_html("a", "a", sb)
    assert "2.70×" not in html and "ss-vs-fast" not in html
    # a different output on the shared, distrusted cloud-only time: no ratio either
    diff = ordered([a, speedup_stats([3.84, 3.8, 3.9], cloud, tokens=40, cloud_calls=12, same_text=False)])[1]
    assert speedup_cell(diff) == "not shown (cloud-only time off)" and "2.70" not in metric_cards({}, speedup=diff)
    # two cloud-only times (B's own reference): B keeps its own verdict
    own = speedup_stats([3.84, 3.8, 3.9], [10.0, 10.1, 10.2], tokens=40, cloud_calls=12, same_text=True)
    assert not ordered([a, own])[1].get("cloud_off")


def test_ab_times_cloud_only_only_where_it_costs_no_more_than_a_decode():
    """Issue 58.7: A/B took 84 s for k=2 vs k=6, cloud-only timed on every repeat."""
    def run(wall):
        return types.SimpleNamespace(live=types.SimpleNamespace(trace={"metrics": {"wall_s": wall}}))
    runs = [run(2.13), run(3.84)]
    slow, cheap = [{"wall_s": 10.37}, {"wall_s": 10.37}], [{"wall_s": 0.6}, None]
    assert not times_cloud("auto", slow, runs) and times_cloud("auto", cheap, runs)
    assert times_cloud("on", slow, runs) and not times_cloud("off", cheap, runs)
    assert not times_cloud("on", [None, None], runs)          # nothing to time without a reference
    assert all("cloud-only not timed" in w for w in UNTIMED_WORDS.values()) and "on" in UNTIMED_WORDS["auto"]


def test_the_readme_speed_line_is_a_measured_range_with_its_machine():
    """Issue 58.6: the README said 1.35–1.40×, Live 2.54×, bench 2.15×: one figure without its machine."""
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    speed = " ".join(text[text.index("## Speed"):].split("\n## ")[0].split())
    assert "make bench" in speed and "2-core CPU" in speed and "load" in speed
    assert "1.34–1.43×" in speed and "1.35–1.40×" not in speed


def test_a_new_backend_is_one_registry_entry(monkeypatch):
    """Issue 55.6: a backend was five places (BACKENDS, available_backends, _load's if/elif,
    pairs/sides.py, evaluation/batch.py); now one REGISTRY entry serves them all."""
    from specdec_core import backends
    from specdec_core.evaluation.batch.manifest import read_manifest
    from specdec_core.evaluation.batch.run import speaker_stats_for
    from specdec_core.pairs.sides import backend_paths

    demo = backends.REGISTRY["demo"]
    monkeypatch.setitem(backends.REGISTRY, "mine", backends.Entry(
        demo.build, demo.paths, env=("SPECSCOPE_TEST_MINE",), reads_audio=False))
    assert "mine" not in backends.available_backends()
    monkeypatch.setenv("SPECSCOPE_TEST_MINE", "1")
    assert "mine" in backends.available_backends()
    assert backend_paths("mine", {}) == backend_paths("demo", {})
    b = backends.load_backend("mine")
    assert type(b) is type(backends.load_backend("demo")) and b.pair_check is not None
    import dataclasses
    clips = [dataclasses.replace(c, speaker="s") for c in
             read_manifest(Path(__file__).resolve().parents[1] / "sample_audio" / "manifest.csv")[:2]]
    assert speaker_stats_for("demo", clips) and speaker_stats_for("mine", clips) == {}   # reads_audio
    with pytest.raises(backends.BackendError, match="unknown backend 'nope'"):
        backends.load_backend("nope")
