"""One vocabulary: every finding is built by specdec_core.findings.finding, every code is in the
registry, docs/findings.md is the registry, and no function in the product folders is over 60
lines."""
from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

import specdec_core.pairs  # noqa: F401  (registers nothing of its own: imported for the scan)
import specdec_core.audit.checks  # noqa: F401  (the served-engine codes)
import specdec_core.recorder.analyze  # noqa: F401
from specdec_core.findings import KEYS, REGISTRY, finding, from_json
from specdec_core.findings_doc import markdown_table

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("specdec_core", "components", "ui")


def _files(*folders):
    return [p for d in folders for p in sorted((ROOT / d).rglob("*.py"))]


def _trees(*folders):
    return [(p, ast.parse(p.read_text(encoding="utf-8"))) for p in _files(*folders)]


def test_docs_findings_carries_the_registry():
    doc = (ROOT / "docs" / "findings.md").read_text(encoding="utf-8")
    body = doc.split("<!-- registry:start -->\n")[1].split("\n<!-- registry:end -->")[0]
    assert body == markdown_table()
    assert "`stale_cache`" in body and "`position_error`" in body


def test_one_constructor_and_no_dict_literal_findings():
    """No other function builds findings: no def finding/_f/_finding outside findings.py and
    no dict literal with a severity and a title (the old constructors' shape)."""
    bad = []
    for path, tree in _trees(*PRODUCT):
        if path == ROOT / "specdec_core" / "findings.py":
            continue
        for n in ast.walk(tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in ("finding", "_f", "_finding"):
                bad.append(f"{path.relative_to(ROOT)}:{n.lineno} def {n.name}")
            if isinstance(n, ast.Dict):
                keys = {k.value for k in n.keys if isinstance(k, ast.Constant)}
                if {"severity", "title"} <= keys or "key" in keys and "severity" in keys:
                    bad.append(f"{path.relative_to(ROOT)}:{n.lineno} dict finding")
    assert bad == []


def test_every_literal_code_is_registered():
    codes = set()
    for _path, tree in _trees("specdec_core", "components"):
        for n in ast.walk(tree):
            if (isinstance(n, ast.Call) and getattr(n.func, "id", None) == "finding" and n.args
                    and isinstance(n.args[0], ast.Constant)):
                codes.add(n.args[0].value)
    assert len(codes) > 35
    assert codes - set(REGISTRY) == set()
    assert {"cache_desync", "draft_distorted", "clean"} & set(REGISTRY) == set()


def test_finding_has_exactly_the_keys_and_checks_its_code():
    f = finding("stale_cache", "t", "d", "c", "x", {"forward": 3})
    assert tuple(f) == KEYS and f.severity == "error" and f.explained_by is None
    with pytest.raises(KeyError):
        finding("cache_desync", "t")
    with pytest.raises(ValueError):
        finding("stale_cache", "t", severity="info")


def test_old_json_with_key_reads_as_code():
    old = {"severity": "error", "key": "cycle", "title": "t", "detail": "d", "cause": "c", "fix": "f"}
    f = from_json(old)
    assert f["code"] == "cycle" and f["explained_by"] is None and "key" not in f


def _long_functions(*folders, limit=60):
    out = []
    for path, tree in _trees(*folders):
        for n in ast.walk(tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([d.lineno for d in n.decorator_list] + [n.lineno])
                if n.end_lineno - start + 1 > limit:
                    out.append(f"{path.relative_to(ROOT)}:{n.lineno} {n.name} ({n.end_lineno - start + 1})")
    return out


def test_no_function_over_60_lines_in_specdec_core():
    assert _long_functions("specdec_core") == []


def test_no_function_over_60_lines_in_components_and_ui():
    assert _long_functions("components", "ui") == []


def test_a_check_emits_only_its_declared_codes(monkeypatch):
    """Under tests (tests/conftest.py) a check that emits a code it did not declare fails."""
    from specdec_core.recorder.checks import registry

    assert os.environ["SPECSCOPE_STRICT_CODES"] == "1"
    registry.load()
    monkeypatch.setattr(registry, "CHECKS", [])           # the fixture check alone

    @registry.check("cycle", scope="run")
    def stray(x) -> list:
        return [finding("cycle", "declared")] + ([finding("doubling", "not declared")] if x else [])

    assert [f["code"] for f in registry.run(False, "run")] == ["cycle"]
    with pytest.raises(AssertionError, match=r"stray emitted undeclared codes \['doubling'\]"):
        registry.run(True, "run")
    monkeypatch.setenv("SPECSCOPE_STRICT_CODES", "0")     # the product: findings as emitted
    assert [f["code"] for f in registry.run(True, "run")] == ["cycle", "doubling"]


def test_side_tables_are_facts_given_at_registration():
    """What a consumer reads of a code is given where the code is registered."""
    from specdec_core.analysis import diagnostics as d
    from specdec_core.recorder.checks import registry
    from specdec_core.recorder.checks.text.trace import codes

    assert {c.code for c in REGISTRY.values() if c.context} == {
        "stale_cache", "context_mismatch", "position_error", "off_by_one", "dropped_output",
        "tree_positions", "tree_mask", "zeroed_kv", "draft_context"}
    assert [k for k, _, _ in REGISTRY["lossless_violation"].named] == ["penalty_not_applied",
                                                                      "first_draft_unverified",
                                                                      "edge_correction_unjudged"]
    assert {c.code: c.dedupes for c in REGISTRY.values() if c.dedupes} == {"greedy_draft_sampling": (
        ("argmax_drafts", "hidden_draft_processing", "effective_temperature"),)}
    assert {fn.__name__: codes(fn) for fn in d.TRACE_CHECKS + d.TASK_CHECKS} == {
        "cycles": ("cycle",), "template_leak": ("template_leak",), "punct_flood": ("punct_flood",),
        "doubling": ("doubling",), "entropy_gate": ("always_verify", "never_verify"),
        "check_edge_mishears": ("edge_mishears",), "length": ("length",), "no_stop": ("no_stop",)}
    pair = registry.of("pair")         # the pair checks: registered checks, one code each
    assert [c.fn.__name__ for c in pair] == [c.codes[0] for c in pair] and len(pair) == 9


def test_context_roots_are_read_from_the_fact_by_both_consumers():
    """The divergence verdict and the Inspect counts name the same context roots; zeroed_kv
    (attended zero keys: the cloud reads a context that is not the text) is one of them."""
    from components.inspect_view import recording_counts
    from specdec_core.analysis.divergence import verdict

    for code in ("zeroed_kv", "stale_cache", "tree_mask"):
        err = finding(code, "t")
        fd = verdict(3, {"id": 1}, {"id": 2}, 1, {}, {"same_context": False}, findings=[err])
        assert fd["explained_by"] == code and fd["cause"] == "decoder"
        assert recording_counts({"diagnostics": [err]}, None)["off_text"] == code
    other = finding("cycle", "t")
    assert verdict(3, {"id": 1}, {"id": 2}, 1, {}, {"same_context": False},
                   findings=[other])["explained_by"] is None
    assert recording_counts({"diagnostics": [other]}, None)["off_text"] is None
