"""The benchmark runs on a tiny pair and writes every field; its predictions are checked against
independent computations. Timings are never asserted: speed claims come from `make bench`."""
import json
import random
import re

import pytest

from specdec_core.cli import main, reports
from specdec_core.evaluation.bench.run import (METHODS, bench_config, cost_model_speedup, decode_stats,
                                           leviathan_alpha, predicted_speedup, run_bench)
from specdec_core.evaluation.bench.sweep import auto_thresholds, plot_sweeps, run_sweeps
from tiny import PairBackend, char_tokenizer, perturbed, tiny_qwen2

QUIET = {"log": lambda s: None}
SUMMARY = re.compile(r"greedy SD vs cloud-only \(HF generate\): \d+\.\d\d× \(range \d+\.\d\d–\d+\.\d\d "
                     r"over (\d+) repeats\), vs minimal cloud loop: \d+\.\d\d× \(range \d+\.\d\d–\d+\.\d\d\), "
                     r"identical outputs: yes \((\d+)/(\d+) clips\)")


def _pair(scale=0.05):   # a draft that agrees partially (alpha about 0.3-0.6 at k = 3-4)
    cloud = tiny_qwen2(64, hidden=48, layers=2, seed=1, init=0.3)
    backend = PairBackend(perturbed(cloud, scale, 3), cloud, char_tokenizer())
    return backend, [backend.build_inputs(None, "detailed", ids=[5, 6, 7]),
                     backend.build_inputs(None, "detailed", ids=[8, 9])]


def test_predicted_speedup_formula():
    # alpha = 0 -> one token per round: 1 / (k c + 1)
    assert abs(predicted_speedup(0.0, 4, 0.25) - 1 / 2) < 1e-9
    # alpha -> 1: (k + 1) / (k c + 1)
    assert abs(predicted_speedup(1.0, 4, 0.0) - 5.0) < 1e-9
    assert abs(predicted_speedup(0.8, 4, 0.1) - (1 - 0.8 ** 5) / (0.2 * 1.4)) < 1e-9


def test_cost_model_is_leviathan_on_independent_acceptance():
    """Simulated rounds where each draft is accepted independently with probability 0.7: the cost
    model over the counted forwards matches the formula at leviathan_alpha's estimate (and that
    estimate recovers 0.7), while accepted / drafted understates α."""
    rng, k, c = random.Random(0), 4, 0.2
    tokens = accepted = drafted = rejections = rounds = 0
    for _ in range(20000):
        n = next((j for j in range(k) if rng.random() >= 0.7), k)   # accepted prefix
        tokens, accepted, drafted, rounds = tokens + n + 1, accepted + n, drafted + k, rounds + 1
        rejections += n < k
    a = leviathan_alpha(accepted, rejections)
    assert abs(a - 0.7) < 0.01
    assert accepted / drafted < 0.6
    cost = cost_model_speedup(tokens, rounds, drafted, c)
    assert abs(cost / predicted_speedup(a, k, c) - 1) < 0.01


def test_cost_model_equals_leviathan_when_the_draft_is_the_cloud():
    """Edge == cloud: every draft is accepted (α = 1), each round commits k + 1 tokens for one
    cloud and k edge forwards, so the counted-forward model is exactly (k+1)/(k c + 1)."""
    cloud = tiny_qwen2(64, hidden=48, layers=2, seed=1, init=0.3)
    backend = PairBackend(cloud, cloud, char_tokenizer(), stop_ids=[])
    cfg = bench_config(k=4, max_new_tokens=15, stop_at_first_sentence=False)
    st = decode_stats(backend, [backend.build_inputs(None, "detailed", ids=[5, 6, 7])], cfg)
    assert (st["tokens"], st["target_forwards"], st["draft_forwards"]) == (15, 3, 12)
    assert st["alpha"] == st["alpha_leviathan"] == 1.0
    for c in (0.1, 0.25, 0.6):
        got = cost_model_speedup(st["tokens"], st["target_forwards"], st["draft_forwards"], c)
        assert abs(got - predicted_speedup(1.0, 4, c)) < 1e-9


def test_bench_and_sweeps_report_every_field(tmp_path):
    backend, prompts = _pair()
    res = run_bench(backend, prompts, k=3, repeats=1, **QUIET)
    assert res["identical_outputs"], res["mismatches"]
    assert res["identical_clips"] == res["clips"] == 2
    assert set(res["wall_s"]) == set(res["wall_s_range"]) == set(METHODS)
    for key in ("ours_vs_hf_assisted", "tracing_overhead", "achieved_speedup", "achieved_speedup_vs_loop",
                "hf_assisted_speedup"):
        lo, hi = res[key + "_range"]
        assert lo <= res[key] <= hi, key
    for key in ("alpha", "alpha_leviathan", "mean_accepted_length", "c", "predicted_speedup",
                "leviathan_predicted", "predicted_from_forwards", "achieved_over_predicted",
                "achieved_over_leviathan", "cloud_calls_per_token"):
        assert isinstance(res[key], float), key

    # the counted decode forwards are the trace's own counts: one cloud forward per verified
    # round, one edge forward per drafted token (prefill excluded)
    st = decode_stats(backend, prompts, bench_config(k=3))
    assert st["target_forwards"] == st["calls"] and st["draft_forwards"] == st["drafted"]
    expect = st["tokens"] / (st["calls"] + res["c"] * st["drafted"])
    assert abs(res["predicted_from_forwards"] - expect) < 1e-3
    # ... and on a classic run the Leviathan formula at the measured α agrees with it (here
    # within 1%; accepted / drafted as α would be 25% low)
    assert 0.2 < res["alpha_leviathan"] < 0.9
    assert abs(res["predicted_from_forwards"] / res["leviathan_predicted"] - 1) < 0.05

    sw = run_sweeps(backend, prompts, res["c"], k=3, ks=(1, 2), thresholds=None, repeats=1, **QUIET)
    res.update(sw)
    assert [r["k"] for r in sw["k_sweep"]] == [1, 2]
    for r in sw["k_sweep"]:
        assert r["identical_clips"] == 2 and r["leviathan"] > 0 and r["predicted"] > 0
        assert r["achieved_vs_loop_range"][0] <= r["achieved_vs_loop"] <= r["achieved_vs_loop_range"][1]
    rows = sw["threshold_sweep"]
    assert rows[0]["threshold"] is None and rows[0]["identical_clips"] == 2 and rows[0]["leviathan"] > 0
    assert len(rows) >= 3 and all(r["leviathan"] is None for r in rows[1:])
    assert [r["threshold"] for r in rows[1:]] == sorted(r["threshold"] for r in rows[1:])
    for r in rows:
        for key in ("cloud_calls_per_token", "alpha", "predicted", "achieved_vs_loop", "achieved_vs_cloud_only",
                    "identical_share", "prefix_agreement", "edge_only_share"):
            assert isinstance(r[key], (int, float)), key
        assert 0 <= r["identical_share"] <= 1 and 0 <= r["prefix_agreement"] <= 1
    # the highest threshold asks the cloud less often than classic mode
    assert rows[-1]["cloud_calls_per_token"] < rows[0]["cloud_calls_per_token"]

    text = reports.bench_report(res)
    assert "k sweep" in text and "threshold sweep" in text
    summary = reports.bench_summary(res)
    assert SUMMARY.search(summary).groups() == ("1", "2", "2")
    assert "Leviathan prediction" in summary and "c = " in summary
    png = plot_sweeps(res, tmp_path / "sweep.png")
    assert png is None or png.stat().st_size > 1000


def test_auto_thresholds_span_the_entropies():
    xs = [i / 100 for i in range(101)]
    assert auto_thresholds(xs) == [0.1, 0.25, 0.5, 0.75, 0.9]
    assert auto_thresholds([]) == []


def test_bench_command_ends_with_the_summary(tmp_path, monkeypatch, capsys):
    backend, _ = _pair()
    monkeypatch.setattr("specdec_core.cli.bench.load_backend", lambda name, **kw: backend)
    out = tmp_path / "bench.json"
    rc = main(["bench", "--repeats", "1", "--sweep", "--ks", "1,2", "--thresholds", "0.5,inf",
               "--json", str(out)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert rc == 0
    assert SUMMARY.search(lines[-3]), lines[-3]
    assert lines[-2].startswith("k = 4, c = ") and "Leviathan prediction" in lines[-2]
    assert "measured cost model" in lines[-2] and lines[-1].startswith("advice: k = ")
    res = json.loads(out.read_text())
    assert [r["threshold"] for r in res["threshold_sweep"]] == [None, 0.5, "inf"]
    assert res["threshold_sweep"][-1]["cloud_calls_per_token"] == 0.0
    assert [r["k"] for r in res["k_sweep"]] == [1, 2]
    if res.get("sweep_plot"):
        assert (tmp_path / "bench.sweep.png").stat().st_size > 1000


@pytest.mark.parametrize("argv", [["--ks", "1,x"], ["--thresholds", "a"], ["--repeats", "0"],
                                  ["--sweep", "--ks", "0,2"], ["--sweep", "--thresholds", "-1"]])
def test_bench_bad_options_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as e:
        rc = main(["bench", *argv])
        raise SystemExit(rc)
    assert e.value.code == 2
