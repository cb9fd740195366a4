"""No import cycles: the import graph of specdec_core is acyclic (every import counts, also the
ones inside functions), and every module of specdec_core, components, ui and devtools imports in a
fresh interpreter whatever the order; the product (app.py, specdec_core, components, ui) never
imports devtools, the build and test tooling outside it."""
from __future__ import annotations

import ast
import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("specdec_core", "components", "ui", "devtools")


def modules(pkg: str) -> dict[str, Path]:
    out = {}
    for p in sorted((ROOT / pkg).rglob("*.py")):
        parts = p.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__main__":
            continue                      # runs the CLI when imported
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the modules of `mods` it imports. `from pkg import sub` counts as importing
    pkg.sub when that is a module; relative imports are resolved."""
    graph = {}
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".")[: len(name.split(".")) - node.level + is_pkg]
                    base = ".".join(anchor + ([base] if base else []))
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    deps.add(sub if sub in mods else base)
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}      # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(v):
        state[v] = 1
        path.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return path[path.index(w):] + [w]
            if w not in state and (c := visit(w)):
                return c
        state[v] = 2
        path.pop()
        return None

    for v in sorted(graph):
        if v not in state and (c := visit(v)):
            return c
    return None


def test_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_graph_reads_relative_and_function_level_imports():
    mods = modules("specdec_core")
    g = import_graph(mods)
    assert "specdec_core.decoding.steps" in g["specdec_core.decoding.decoder"]
    assert "specdec_core.evaluation.batch.manifest" in g["specdec_core.evaluation.bench.run"]  # inside a function
    ui = import_graph(modules("ui"))
    assert "ui.common" in ui["ui.runs"]                                                 # relative


@pytest.mark.parametrize("pkg", PACKAGES)
def test_no_import_cycle(pkg):
    cycle = find_cycle(import_graph(modules(pkg)))
    assert cycle is None, " -> ".join(cycle)


def test_the_product_never_imports_devtools():
    dev = modules("devtools")
    g = import_graph({**dev, "app": ROOT / "app.py",
                      **{n: p for pkg in PACKAGES[:3] for n, p in modules(pkg).items()}})
    assert {n: d & set(dev) for n, d in g.items() if n not in dev and d & set(dev)} == {}
    assert "devtools.train_demo" in g["devtools.train_head"]      # the graph sees devtools' imports
    assert "specdec_core.demo.prompt" in g["devtools.demo_corpus"]


def test_no_module_over_300_lines():
    long = {n: len(p.read_text(encoding="utf-8").splitlines()) for n, p in modules("specdec_core").items()}
    assert {n: k for n, k in long.items() if k > 320} == {}


def _orders():
    names = [n for pkg in PACKAGES for n in modules(pkg)]
    yield "sorted", names
    yield "reversed", names[::-1]
    for seed in (1, 2, 3):
        shuffled = names[:]
        random.Random(seed).shuffle(shuffled)
        yield f"shuffled-{seed}", shuffled


# One interpreter imports the third-party packages the modules name (torch, transformers,
# gradio: most of each order's seconds), then forks a child per order that imports the modules
# in that order: each child is fresh for every module of ours, as a new interpreter is.
FORKED = """
import ast, importlib, json, os, sys, traceback
orders, files = json.loads(open(sys.argv[1]).read()), json.loads(open(sys.argv[2]).read())
ours = {"specdec_core", "components", "ui", "devtools", "app"}
for path in files:
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        names = [(a.name, None) for a in node.names] if isinstance(node, ast.Import) else \
            [(node.module, a.name) for a in node.names] if isinstance(node, ast.ImportFrom) \
            and node.module and not node.level else []
        for mod, attr in names:
            if mod.split(".")[0] in ours:
                continue
            try:
                getattr(importlib.import_module(mod), attr or "__name__", None)
            except Exception:
                pass
assert not ours & {m.split(".")[0] for m in sys.modules}, "a module of ours was imported before the fork"
out = {}
for label, order in orders:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:
            for m in order:
                importlib.import_module(m)
        except BaseException:
            os.write(w, traceback.format_exc().encode())
            code = 1
        os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        err = f.read().decode(errors="replace")
    out[label] = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), err]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """{order's label: (exit status, traceback)} of importing every module in that order."""
    d = tmp_path_factory.mktemp("imports")
    (d / "orders.json").write_text(json.dumps(list(_orders())), encoding="utf-8")
    files = [str(p) for pkg in PACKAGES for p in modules(pkg).values()]
    (d / "files.json").write_text(json.dumps(files), encoding="utf-8")
    p = subprocess.run([sys.executable, "-c", FORKED, str(d / "orders.json"), str(d / "files.json")],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("label", [o[0] for o in _orders()])
def test_every_module_imports_in_a_fresh_interpreter(imported, label):
    code, err = imported[label]
    assert code == 0, err[-2000:]


# -- the flow in the imports (docs/architecture.md): observe -> normalize -> evidence -> checks ->
# report -> analyze -> driver; the engine never imports the CLI; the recorder's public API
FLOW = ("observe", "normalize", "evidence", "checks", "report", "analyze", "driver")


def _stage(name: str) -> int | None:
    parts = name.split(".")
    return FLOW.index(parts[2]) if parts[:2] == ["specdec_core", "recorder"] and len(parts) > 2 \
        and parts[2] in FLOW else None


def against_flow(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} -> {d}" for m, ds in graph.items() for d in ds
                  if _stage(m) is not None and _stage(d) is not None and _stage(d) > _stage(m))


def test_no_recorder_stage_imports_a_later_one():
    g = import_graph(modules("specdec_core"))
    assert against_flow(g) == []
    assert "specdec_core.recorder.evidence.tape" in g["specdec_core.recorder.evidence.rounds"]  # sees them
    assert against_flow({"specdec_core.recorder.normalize.x": {"specdec_core.recorder.checks.y"}})


def test_the_engine_never_imports_the_cli():
    g = import_graph(modules("specdec_core"))
    assert {m: sorted(d) for m, ds in g.items() if not m.startswith("specdec_core.cli")
            and (d := {x for x in ds if x.startswith("specdec_core.cli")})} == {}
    assert "specdec_core.cli.reports" in g["specdec_core.cli.commands"]     # the graph sees the CLI's


PUBLIC = ("specdec_core.recorder.checks.registry",   # where engine and pair checks register
          "specdec_core.recorder.checks")


def past_recorder_api(source: str) -> list[str]:
    """The import lines of `source` that name a module inside specdec_core.recorder."""
    out = []
    for node in ast.walk(ast.parse(source)):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        out += [f"{node.lineno} {n}" for n in names if n.startswith("specdec_core.recorder.")
                and n not in PUBLIC]
    return out


def test_nothing_outside_the_recorder_imports_past_its_public_api():
    files = [p for pkg in PACKAGES[:3] for p in modules(pkg).values()
             if "specdec_core/recorder/" not in p.as_posix()] + [ROOT / "app.py"]
    assert {p.relative_to(ROOT).as_posix(): hits for p in files
            if (hits := past_recorder_api(p.read_text(encoding="utf-8")))} == {}
    assert past_recorder_api("def f():\n    from specdec_core.recorder.driver.clip import KNOBS\n"
                             "import specdec_core.recorder.analyze\nfrom specdec_core.recorder import analyze\n") \
        == ["3 specdec_core.recorder.analyze", "2 specdec_core.recorder.driver.clip"]    # ast.walk: breadth first


# -- the docs name only files that exist
DOC_PATH = re.compile(r"(?<![\w/])((?:specdec_core|recorder)/[\w./]*\w/?)")


def missing_paths(text: str) -> list[str]:
    """The `specdec_core/...` and `recorder/...` names in `text` that name no file or folder
    (`recorder/x/y.fn`: a name in recorder/x/y.py)."""
    out = []
    for name in DOC_PATH.findall(text):
        p = ROOT / (name if name.startswith("specdec_core/") else "specdec_core/" + name).rstrip("/")
        stem = p.with_name(p.name.split(".")[0])
        if not (p.exists() or stem.with_suffix(".py").exists() or (stem.is_dir() and "." in p.name)):
            out.append(name)
    return out


@pytest.mark.parametrize("doc", ["architecture.md", "recorder.md"])
def test_the_docs_name_only_files_that_exist(doc):
    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    assert len(DOC_PATH.findall(text)) > 20
    assert missing_paths(text) == []
    assert missing_paths("see recorder/driver/clip.isolate and specdec_core/findings.py, "
                         "recorder/checks/<family>/ and specdec_core/recorder/normalize/") == []
    assert missing_paths("recorder/driver/gone.py, recorder/model_or_decoder.fn") == [
        "recorder/driver/gone.py", "recorder/model_or_decoder.fn"]
