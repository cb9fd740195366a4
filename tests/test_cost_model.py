"""The measured cost model (evaluation/bench/cost_model.py) and the bench advice (evaluation/bench/advice.py).

Only pure functions and the JSON schema are tested: no assertion here depends on a wall-clock
timing (speed claims come from `make bench`, docs/benchmarks.md)."""
import json
import math

import pytest

from specdec_core.api import load_backend
from specdec_core.cli import main
from specdec_core.decoding.decoder import SpeculativeDecoder
from specdec_core.evaluation.bench import cost_model as cm
from specdec_core.evaluation.bench import cost_probe
from specdec_core.evaluation.bench.run import bench_config, sample_prompts

COSTS = cm.Costs(edge={1: 1.0, 2: 1.5}, cloud={1: 4.0, 2: 4.5, 3: 5.0, 4: 5.5, 5: 6.0, 6: 6.5},
                 round_overhead=0.8, k_ref=4, overhead_per_k=0.1, token_overhead=0.2)


def test_predicted_speedup_matches_a_hand_computation():
    profile, k = [0.9, 0.8, 0.5, 0.5], 4
    s = [0.9, 0.72, 0.36, 0.18]
    tokens = 1 + sum(s)
    # 4 edge forwards, the first one 2 tokens wide with probability s_4; cloud of k+1 = 5; o(4)
    round_s = 4 * 1.0 + 0.18 * (1.5 - 1.0) + 6.0 + 0.8
    assert cm.tokens_per_round(profile, k) == pytest.approx(tokens)
    assert cm.round_time(profile, k, COSTS) == pytest.approx(round_s)
    assert cm.predict_speedup(profile, k, COSTS) == pytest.approx((4.0 + 0.2) * tokens / round_s)
    # per-decode fixed costs, n tokens per decode
    c = cm.Costs(**{**vars(COSTS), "_fits": {}, "decode_sd": 3.0, "decode_loop": 2.0})
    n = 40
    want = (2.0 + n * 4.2) / (3.0 + n * round_s / tokens)
    assert cm.predict_speedup(profile, k, c, tokens_per_decode=n) == pytest.approx(want)
    # the drafts after a round's first one at the warm edge cost, when one is measured
    warm = cm.Costs(**{**vars(COSTS), "_fits": {}, "edge_warm": 0.6})
    assert cm.round_time(profile, k, warm) == pytest.approx(round_s - 3 * (1.0 - 0.6))
    assert cm.Costs.from_dict(json.loads(json.dumps(warm.to_dict()))).edge_warm == 0.6
    # o(k) moves by overhead_per_k per draft token away from k_ref; k = 2 uses cloud(3)
    assert cm.round_time(profile, 2, COSTS) == pytest.approx(2 * 1.0 + 0.72 * 0.5 + 5.0 + 0.6)


def test_cost_model_reduces_to_leviathan_when_its_assumptions_hold():
    """Width-free forwards (cloud 1, edge c), no overhead, i.i.d. acceptance α: the formula."""
    from specdec_core.evaluation.bench.run import predicted_speedup

    c, alpha = 0.2, 0.8
    flat = cm.Costs(edge={1: c, 2: c}, cloud={w: 1.0 for w in range(1, 10)})
    for k in (1, 3, 4, 8):
        assert cm.predict_speedup([alpha] * k, k, flat) == pytest.approx(predicted_speedup(alpha, k, c))


def test_advised_k_is_the_argmax_and_moves_with_the_costs():
    profile = [0.9, 0.85, 0.8, 0.8, 0.75, 0.7, 0.7, 0.7]
    ks = range(1, 9)
    adv = cm.advise_k(profile, COSTS, ks)
    preds = {r["k"]: r["predicted"] for r in adv["by_k"]}
    assert adv["k"] == max(preds, key=preds.get)
    assert adv["predicted"] == max(preds.values())
    assert [r["k"] for r in adv["by_k"]] == list(ks)
    # a much wider verify forward makes long blocks expensive: the advice moves to a smaller k
    steep = cm.Costs(edge=COSTS.edge, cloud={1: 4.0, 2: 6.0}, round_overhead=0.8, k_ref=4)
    assert cm.advise_k(profile, steep, ks)["k"] < adv["k"]
    # one profile per k (each measured at its k): still the argmax, each k with its own
    per_k = {k: [0.5 + 0.05 * k] * k for k in ks}
    adv2 = cm.advise_k(per_k, COSTS, ks)
    want = {k: cm.predict_speedup(per_k[k], k, COSTS) for k in ks}
    assert adv2["k"] == max(want, key=want.get)
    assert [r["predicted"] for r in adv2["by_k"]] == [round(want[k], 4) for k in ks]
    # a free draft and perfect acceptance: the longest k wins
    assert cm.advise_k([1.0] * 8, cm.Costs(edge={1: 0.0, 2: 0.0}, cloud={1: 1.0, 2: 1.0}), ks)["k"] == 8


def test_costs_fit_extrapolates_and_round_trips_through_json():
    c = cm.Costs(edge={1: 1.0, 2: 2.0}, cloud={1: 4.0, 3: 8.0}, round_overhead=0.5, k_ref=3,
                 overhead_per_k=0.05, token_overhead=0.1, decode_sd=2.0, decode_loop=1.0)
    assert c.forward("cloud", 2) == pytest.approx(6.0)      # on the fitted line 2 + 2w
    assert c.forward("cloud", 9) == pytest.approx(20.0)
    assert c.forward("cloud", 3) == 8.0                      # measured points are used as they are
    d = json.loads(json.dumps(c.to_dict()))
    back = cm.Costs.from_dict(d)
    assert (back.edge, back.cloud) == (c.edge, c.cloud)
    for f in ("round_overhead", "k_ref", "overhead_per_k", "token_overhead", "decode_sd", "decode_loop"):
        assert getattr(back, f) == pytest.approx(getattr(c, f)), f
    assert d["fit"]["cloud"] == {"a_s": 2.0, "b_s_per_token": 2.0}


def test_conditional_acceptance_by_hand():
    R = lambda d, a, v=True: {"drafted": d, "accepted": a, "verified": v}  # noqa: E731
    rounds = [R(4, 4), R(4, 2), R(4, 0), R(2, 2), R(3, 1, False)]
    acc = cm.conditional_acceptance(rounds)
    # position 1 judged in 4 verified rounds, accepted in 3; position 2: judged 3 (4-4, 4-2, 2-2)
    # accepted 3; position 3: judged 2 (4-4, 4-2: rejected), accepted 1; position 4: 1 of 1
    assert acc["judged"] == [4, 3, 2, 1] and acc["accepted"] == [3, 3, 1, 1]
    assert acc["profile"] == [0.75, 1.0, 0.5, 1.0]


def test_trace_time_and_loop_time_by_hand():
    R = lambda d, a, v, fed: {"drafted": d, "accepted": a, "verified": v, "cloud_fed": fed}  # noqa: E731
    c = cm.Costs(edge={1: 1.0, 2: 1.5}, cloud={1: 4.0, 5: 6.0, 9: 8.0}, round_overhead=0.5, k_ref=4,
                 decode_sd=2.0, decode_loop=1.0, token_overhead=0.25)
    rounds = [R(4, 4, True, 5),      # all accepted: the next round's first edge forward is 2 wide
              R(4, 0, False, 0),     # edge-only round (gated), then a catch-up of 9
              R(4, 1, True, 9)]
    want = 2.0 + (4 + 6.0 + 0.5) + (4 + 0.5 + 0.5) + (4 + 8.0 + 0.5)
    assert cm.trace_time(rounds, c, 4) == pytest.approx(want)
    c.edge_warm = 0.5                # drafts after the first of a round: 3 per round at 0.5
    assert cm.trace_time(rounds, c, 4) == pytest.approx(want - 3 * 3 * 0.5)
    assert cm.loop_time(10, c) == pytest.approx(1.0 + 10 * 4.25)


def test_decode_overheads_split_rounds_from_forwards():
    F = cost_probe.Fwd
    ev = [F("edge", 5, 0, 0.0, 1.0), F("edge", 1, 5, 1.0, 2.0), F("cloud", 5, 0, 2.0, 4.0),
          F("cloud", 2, 5, 4.0, 5.0),                                  # round 1 ends at 5.0
          F("edge", 1, 6, 5.5, 6.0), F("cloud", 2, 6, 6.5, 7.5),      # round 2: 2.5 s, 1.5 forwards
          F("edge", 1, 7, 8.0, 8.5), F("cloud", 2, 7, 9.0, 10.0)]     # round 3: 2.5 s, 1.5 forwards
    o = cost_probe.decode_overheads(ev, -1.0, 11.0)
    assert o["rounds"] == pytest.approx([1.0, 1.0])
    assert o["prefill"] == {"edge": 1.0, "cloud": 2.0}
    assert o["outside"] == pytest.approx(12.0 - 8.0)         # 8 s of forwards in 12 s
    assert o["rest"] == pytest.approx(2.0) and o["n_rounds"] == 3


@pytest.fixture(scope="module")
def demo_traces():
    backend = load_backend("demo")
    prompts = sample_prompts(backend, 4)
    return [SpeculativeDecoder(backend, bench_config(k=4)).run(p) for p in prompts]


def test_acceptance_profile_of_a_demo_trace_is_consistent_with_its_counts(demo_traces):
    rounds = [r for tr in demo_traces for r in tr.rounds]
    verified = [r for r in rounds if r.verified]
    acc = cm.conditional_acceptance(rounds)
    assert sum(acc["accepted"]) == sum(r.accepted for r in verified)
    assert acc["judged"][0] == sum(r.drafted > 0 for r in verified)
    for i in range(len(acc["judged"]) - 1):    # judged at i+1 = accepted at i, unless the block ended
        assert acc["judged"][i + 1] == sum(r.accepted > i and r.drafted > i + 1 for r in verified)
    assert 0 < min(acc["profile"]) and max(acc["profile"]) <= 1
    # on full blocks, survival s_i is the metrics' per-position acceptance (share of rounds whose
    # draft i was accepted), and the expected tokens per round is the mean committed per round
    full = [r for r in verified if r.drafted == 4]
    prof = cm.conditional_acceptance(full)["profile"]
    for i, s in enumerate(cm.survival(prof, 4)):
        assert s == pytest.approx(sum(r.accepted > i for r in full) / len(full), abs=1e-3)
    mean_committed = sum(r.accepted + 1 for r in full) / len(full)
    assert cm.tokens_per_round(prof, 4) == pytest.approx(mean_committed, rel=1e-3)


def test_bench_json_carries_the_cost_model_and_the_advice(tmp_path, monkeypatch, capsys):
    from test_bench import _pair

    backend, _ = _pair()
    monkeypatch.setattr("specdec_core.cli.bench.load_backend", lambda name, **kw: backend)
    out = tmp_path / "bench.json"
    rc = main(["bench", "--repeats", "1", "--k", "3", "--ks", "1,2,3", "--thresholds", "0.5,inf",
               "--json", str(out)])
    lines = capsys.readouterr().out.strip().splitlines()
    assert rc == 0
    res = json.loads(out.read_text())
    for key in ("achieved_speedup", "achieved_over_predicted", "ours_vs_hf_assisted", "tracing_overhead",
                "predicted_speedup", "leviathan_predicted", "achieved_over_leviathan", "cost_model",
                "advice", "advice_check"):
        assert key in res, key
    m = res["cost_model"]
    assert m["widths"] == [1, 2, 3, 4, 12, 16]       # 1..max k + 1, and two catch-up widths
    assert len(m["edge_s"]) == len(m["cloud_s"]) == len(m["widths"])
    assert all(isinstance(x, float) and x > 0 for x in m["edge_s"] + m["cloud_s"])
    assert isinstance(m["edge_warm_s"], float) and m["edge_warm_s"] > 0
    for key in ("fit", "round_overhead_s", "loop_token_overhead_s", "decode_fixed_s", "cache_len",
                "acceptance_profile", "predicted_range", "achieved_over_predicted_range", "per_repeat", "formula"):
        assert key in m, key
    assert set(m["fit"]) == {"edge", "cloud"} and m["k_ref"] == 3
    assert m["clock"] == "cpu"          # both models on the CPU: CPU time (cost_probe.default_clock)
    assert res["predicted_speedup"] == m["predicted_speedup"]
    assert res["achieved_over_predicted"] == m["achieved_over_predicted"]
    # the JSON's own numbers reproduce its prediction (pure function of profile, costs, k)
    costs = cm.Costs.from_dict(m)
    costs.overhead_per_k = 0.0
    again = cm.predict_speedup(m["acceptance_profile"], 3, costs, m["tokens_per_decode"])
    assert again == pytest.approx(m["predicted_speedup"], rel=0.05)
    a = res["advice"]
    assert a["k"] in (1, 2, 3) and [r["k"] for r in a["by_k"]] == [1, 2, 3]
    assert a["predicted"] == max(r["predicted"] for r in a["by_k"])
    assert [r["threshold"] for r in a["thresholds"]] == [None, 0.5, "inf"]
    assert a["thresholds"][0]["quality_cost"] == 0.0          # classic greedy is the cloud's output
    assert a["classic_predicted"] == a["thresholds"][0]["predicted"]
    if a["threshold"] is None:        # none within the budget, or none 5% faster than classic
        b = a["best_within_budget"]
        assert b is None or b["predicted"] < a["classic_predicted"] * 1.05
    else:
        row = next(r for r in a["thresholds"] if r["threshold"] == a["threshold"])
        assert row["quality_cost"] <= 0.1 and row["predicted"] >= a["classic_predicted"] * 1.05
        assert row["predicted"] == max(r["predicted"] for r in a["thresholds"][1:] if r["quality_cost"] <= 0.1)
    chk = res["advice_check"]["advised_k"]
    assert chk["k"] == a["k"] and chk["predicted"] == a["predicted"]
    assert isinstance(chk["within_tolerance"], bool) and math.isfinite(chk["achieved_over_predicted"])
    assert lines[-1].startswith(f"advice: k = {a['k']} ") and "within 15%" in lines[-1]
    assert "measured cost model" in lines[-2] and "Leviathan prediction" in lines[-2]
