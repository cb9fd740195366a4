"""The benchmark runs on a tiny pair and writes every field (timings are not asserted)."""
from specdec_core.evaluation.bench import METHODS, k_sweep, plot_sweep, predicted_speedup, run_bench
from tiny import PairBackend, char_tokenizer, perturbed, tiny_qwen2


def test_predicted_speedup_formula():
    # alpha = 0 -> one token per round: 1 / (k c + 1)
    assert abs(predicted_speedup(0.0, 4, 0.25) - 1 / 2) < 1e-9
    # alpha -> 1: (k + 1) / (k c + 1)
    assert abs(predicted_speedup(1.0, 4, 0.0) - 5.0) < 1e-9
    assert abs(predicted_speedup(0.8, 4, 0.1) - (1 - 0.8 ** 5) / (0.2 * 1.4)) < 1e-9


def test_bench_runs_and_reports_every_field(tmp_path):
    tok = char_tokenizer()
    cloud = tiny_qwen2(64, hidden=48, layers=2, seed=1, init=0.3)
    backend = PairBackend(perturbed(cloud, 0.4, 3), cloud, tok)
    prompts = [backend.build_inputs(None, "detailed", ids=[5, 6, 7]),
               backend.build_inputs(None, "detailed", ids=[8, 9])]
    res = run_bench(backend, prompts, k=3, repeats=1, log=lambda s: None)
    assert res["identical_outputs"], res["mismatches"]
    assert set(res["wall_s"]) == set(METHODS)
    for key in ("ours_vs_hf_assisted", "tracing_overhead", "alpha", "mean_accepted_length", "c",
                "predicted_speedup", "achieved_speedup", "achieved_over_predicted", "hf_assisted_speedup"):
        assert isinstance(res[key], float), key
    rows = k_sweep(backend, prompts, res["c"], ks=(1, 2), repeats=1, log=lambda s: None)
    assert [r["k"] for r in rows] == [1, 2] and all(r["predicted"] > 0 for r in rows)
    png = plot_sweep(rows, tmp_path / "sweep.png")
    assert png is None or png.stat().st_size > 1000
