"""One fold (issue 55.2): recorder/report is the only writer of a judged result's findings and of
its trace's diagnostics. Read from the product's source: nothing else assigns, extends or appends
to `.findings`, `.diagnostics`, `["findings"]` or `["diagnostics"]`. And by behaviour: the batch
layout finding and the numerics verdict of `run --baseline` are made by the report step."""
from __future__ import annotations

import ast
import copy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLD = ROOT / "specdec_core" / "recorder" / "report"
KEYS = ("findings", "diagnostics")


def _key(node) -> str | None:
    """'findings' / 'diagnostics' when node is x.findings, x["findings"] (or diagnostics)."""
    if isinstance(node, ast.Attribute) and node.attr in KEYS:
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value in KEYS:
        return node.slice.value
    return None


def writes(src: str, attributes: bool = True) -> list[int]:
    """Lines of `src` that write a findings / diagnostics list (attributes: also x.findings = ...;
    off for the page, whose widgets are called `self.findings`)."""
    out = []
    for node in ast.walk(ast.parse(src)):
        targets = (node.targets if isinstance(node, ast.Assign) else [node.target]
                   if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "append", "extend", "insert", "remove", "pop", "clear"):
            targets = [node.func.value]
        for t in targets:
            for e in (t.elts if isinstance(t, ast.Tuple) else [t]):
                if _key(e) and (attributes or isinstance(e, ast.Subscript)):
                    out.append(node.lineno)
    return sorted(set(out))


def test_the_reader_finds_each_kind_of_write():
    src = ('r.findings = []\nt["diagnostics"] += [1]\nt["findings"].append(1)\n'
           'a, r.diagnostics = 1, []\nx = r.findings\nr.findings_html = 1\n')
    assert writes(src) == [1, 2, 3, 4]
    assert writes(src, attributes=False) == [2, 3]


def test_only_the_report_writes_findings_or_diagnostics():
    bad = []
    for pkg in ("specdec_core", "components", "ui"):
        for p in sorted((ROOT / pkg).rglob("*.py")):
            if FOLD in p.parents:
                continue
            for line in writes(p.read_text(encoding="utf-8"), attributes=pkg == "specdec_core"):
                bad.append(f"{p.relative_to(ROOT)}:{line}")
    assert not bad, "findings written outside recorder/report: " + ", ".join(bad)


@pytest.fixture(scope="module")
def backend():
    from specdec_core.api import load_backend

    return load_backend("demo")


def test_an_unread_batch_layout_is_the_reports_finding(backend):
    """Before the report step an unreadable batch has no finding; finish makes `batch_layout`."""
    from specdec_core.recorder.analyze import checked
    from specdec_core.recorder.driver.clip import load_function, record_clip
    from specdec_core.recorder.report import finish

    fn, path = load_function(str(ROOT / "examples" / "decoders" / "batched" / "lucidrains_batched.py"))
    knobs = {"k": 4, "max_new_tokens": 8, "temperature": 0.0, "verify": "greedy", "prompt_type": "detailed"}
    rec = copy.deepcopy(record_clip(fn, path, backend, str(ROOT / "sample_audio" / "angry_01.wav"),
                                    knobs)["recording"])
    assert any((f.get("batch") or 1) > 1 for f in rec["forwards"])
    for f in rec["forwards"][3:]:
        f["batch_rows"] = None
    r = checked(rec, backend.tokenizer)
    assert r.findings == [] and r.batch["unread"]
    finish(r)
    assert [f["code"] for f in r.findings] == ["batch_layout"] and r.trace.diagnostics is r.findings
