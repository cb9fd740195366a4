"""Issue 41 item 3: recording a `torch.compile(model)`'d pair. The recorder's forward hooks are
torch.compiler.disable'd: dynamo does not trace them, so they break no graph (before: 7 breaks
on one forward of the demo cloud, Tensor.tolist and data-dependent scalars in the hooks), and a
compiled loop is judged exactly as the eager one. The cost after warm-up is measured by
scripts/bench_compiled.py, not here. Also: stale_cache on a preallocated (static) cache says
"write position", not "crop"."""
from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import pytest
import torch
import torch._dynamo as dynamo
from transformers import DynamicCache, StaticCache

from specdec_core.api import load_backend, prepare
from specdec_core.compat import preallocated
from specdec_core.decoding.config import DecodeConfig
from specdec_core.recorder.analyze import analyze
from specdec_core.recorder.observe.hooks import Recorder

ROOT = Path(__file__).resolve().parents[1]
CLIP = ROOT / "sample_audio" / "sad_01.wav"


def _loop(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / "decoders" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.decode


@pytest.fixture(scope="module")
def pair():
    b = load_backend("demo")
    return b, prepare(b, str(CLIP), DecodeConfig(prompt_type="detailed"))


def _record(b, p, decode, edge, cloud):
    with torch.no_grad(), Recorder(b.edge, b.cloud, b.tokenizer, p.input_ids, b.stop_ids, k=4,
                                   max_new_tokens=10, temperature=0.0, verify="greedy") as rec:
        out = decode(edge, cloud, b.tokenizer, p.input_ids, k=4, max_new_tokens=10,
                     stop_ids=b.stop_ids)
    return rec.finish(out)


@pytest.mark.slow
def test_a_compiled_cloud_is_judged_as_the_eager_one_and_the_hooks_break_no_graph(pair):
    """The loop with its cloud compiled (the whole module: the hooks are inside what dynamo
    sees) records the same forwards and gets the same findings as the eager loop, and dynamo
    counts no graph break (the hooks would add 7 per forward if it traced them)."""
    from torch._dynamo.utils import counters

    b, p = pair
    decode = _loop("no_resync")
    eager = _record(b, p, decode, b.edge, b.cloud)
    dynamo.reset()
    counters.clear()
    compiled = _record(b, p, decode, b.edge, torch.compile(b.cloud, backend="eager", dynamic=True))
    breaks = dict(counters["graph_break"])
    dynamo.reset()
    assert breaks == {}, breaks
    assert compiled["out_ids"] == eager["out_ids"]
    assert [f["ids"] for f in compiled["forwards"]] == [f["ids"] for f in eager["forwards"]]
    te, fe = analyze(eager, b.tokenizer)
    tc, fc = analyze(compiled, b.tokenizer)
    key = lambda fs: sorted((f["code"], f["severity"]) for f in fs if f["code"] != "loop_overhead")
    assert key(fc) == key(fe)
    assert "stale_cache" in {f["code"] for f in fc if f["severity"] == "error"}
    assert [(r["drafted"], r["accepted"]) for r in tc.to_dict()["rounds"]] == \
        [(r["drafted"], r["accepted"]) for r in te.to_dict()["rounds"]]


def test_stale_cache_on_a_static_cache_names_the_write_position(pair):
    b, p = pair
    cfg = b.cloud.config
    assert preallocated(StaticCache(config=cfg, max_cache_len=8)) and not preallocated(DynamicCache())
    rec = _record(b, p, _loop("no_resync"), b.edge, b.cloud)
    _, found = analyze(rec, b.tokenizer)
    plain = next(f for f in found if f["code"] == "stale_cache")
    assert "crop" in plain["fix"]
    static = copy.deepcopy(rec)
    for f in static["forwards"]:
        f["cache_static"] = True           # what the hook marks for a StaticCache's forwards
    _, found = analyze(static, b.tokenizer)
    f = next(f for f in found if f["code"] == "stale_cache")
    assert "write position" in f["fix"] and "write position" in f["cause"]
    assert "crop" not in f["fix"] and "crop" not in f["cause"]
