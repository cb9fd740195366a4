"""components/tree_view.py on a real tree round of the built-in decoder (demo pair)."""
from specdec_core.api import load_backend, prepare
from specdec_core.decoding.config import DecodeConfig
from specdec_core.decoding.decoder import SpeculativeDecoder

from components.tree_view import render_tree, tree_rounds


def test_tree_view_draws_nodes_path_and_probabilities():
    demo = load_backend("demo")
    cfg = DecodeConfig(draft_tree="dynamic", max_new_tokens=12, stop_at_first_sentence=False)
    tr = SpeculativeDecoder(demo, cfg, dependence=False).run(prepare(demo, "sample_audio/sad_01.wav", cfg)).to_dict()
    assert tree_rounds(tr) == [r["round"] for r in tr["rounds"]]
    html = render_tree(tr, 1)
    tree = tr["rounds"][0]["tree"]
    assert html.count('class="ss-tree-node"') == len(tree["nodes"]) + 2     # + root + correction/bonus
    assert html.count('stroke-width="3"') >= 2 * len(tree["path"]) + 1
    assert "draft p 0." in html and "cloud p " in html and "None" not in html
    assert "No token tree" in render_tree(tr, 999) and "No token tree" in render_tree(None, None)


def test_ab_table_compares_chain_and_tree_metrics():
    from components.compare import metric_diff_table

    chain = {"mean_accepted_length": 3.5, "nodes_per_call": None, "acceptance_by_depth": None}
    tree = {"mean_accepted_length": 4.45, "nodes_per_call": 10.0, "acceptance_by_depth": [0.9, 0.8]}
    rows = metric_diff_table(chain, tree, same_text=True).set_index("metric")
    assert rows.loc["nodes_per_call", "B"] == 10.0 and rows.loc["mean_accepted_length", "better"] == "B"
    assert "acceptance_by_depth" in rows.index


def test_recorded_tree_loop_tree_per_step_with_texts_and_cloud_probabilities():
    """Issue 34 item 2 on Inspect: a recorded tree loop's rounds carry their tree with the cloud
    call that verified it; each drill-down step of such a call maps to its round, and the tree
    names every node by its text and gives the cloud's p along the accepted path."""
    import re

    from components.inspect_view import split_rounds, step_round
    from ui.inspect import _texts, on_tree, record_example

    res = record_example("tree_correct", "sad_01", max_new_tokens=32)
    tr, rec = res["trace"], res["recording"]
    have = tree_rounds(tr)
    assert have
    steps = {n: step_round(rec, tr, n) for n in range(1, len(split_rounds(rec)) + 1)}
    assert sorted(r for r in steps.values() if r is not None) == have      # one step per tree round
    n, rnd = next((n, r) for n, r in steps.items() if r is not None)
    call = [f for f in split_rounds(rec)[n - 1] if f["model"] == "cloud"][0]
    tree = next(r["tree"] for r in tr["rounds"] if r["round"] == rnd)
    assert tree["forward"] == call["i"]
    got, html = on_tree({"trace": tr}, rnd)
    assert got == rnd and f'data-round="{rnd}"' in html
    titles = re.findall(r"<title>node (\d+): (.*?) \(id (\d+)\).*?cloud p (\S+)</title>", html)
    assert len(titles) == len(tree["nodes"])
    texts = _texts()
    assert all(text == texts(int(i)) for _, text, i, _ in titles)        # names, not "#id"
    assert all(p != "—" for node, _, _, p in titles if int(node) in tree["path"])
    assert on_tree({"trace": tr}, 999)[0] == have[0] and on_tree(None, None)[0] is None


def test_a_tree_run_folds_siblings_plots_entropy_and_acceptance_by_depth():
    """Issue 43 item 2 on a real dynamic-tree run: rejected siblings fold into one mark per
    round (listed on click / hover, with the round's tree one click away), tree drafts carry their
    entropy, and the position plot reads depth, not sibling slots."""
    import re

    from components.plots import depth_acceptance, position_acceptance_figure
    from components.token_view import render_tokens

    demo = load_backend("demo")
    cfg = DecodeConfig(draft_tree="dynamic", max_new_tokens=16, stop_at_first_sentence=False)
    tr = SpeculativeDecoder(demo, cfg, dependence=False).run(prepare(demo, "sample_audio/sad_01.wav", cfg)).to_dict()
    html = render_tokens(tr)
    rounds_with_rejects = {r["round"] for r in tr["rejected"] if r.get("node") is not None}
    marks = re.findall(r'<span class="ss-fold" tabindex="0" data-round="(\d+)" data-rejected="(\d+)"', html)
    assert rounds_with_rejects and sorted(int(r) for r, _ in marks) == sorted(rounds_with_rejects)
    assert sum(int(n) for _, n in marks) == len(tr["rejected"])
    assert 'class="ss-fold-tree"' in html and "live-tree-round" in html
    # every struck-through sibling sits inside its round's fold, none inline
    assert html.count('data-source="rejected"') == len(tr["rejected"])
    outside = re.sub(r'<span class="ss-fold-list">.*?</button></span>', "", html, flags=re.S)
    assert 'data-source="rejected"' not in outside.split('class="ss-tokens"')[1]
    drafted = [t for t in tr["tokens"] if t["source"] == "accepted"] + tr["rejected"]
    assert drafted and all(t["entropy"] is not None and t["entropy"] >= 0 for t in drafted)
    assert any(t["entropy"] > 0 for t in drafted)
    rows = depth_acceptance(tr)
    assert rows and [d for d, *_ in rows] == list(range(1, len(rows) + 1))
    assert [round(a, 4) for _, a, _ in rows] == tr["metrics"]["acceptance_by_depth"][: len(rows)]
    fig = position_acceptance_figure(tr)
    assert "depth" in fig.layout.title.text and len(fig.data[0].x) <= cfg.k
