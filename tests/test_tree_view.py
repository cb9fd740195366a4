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
