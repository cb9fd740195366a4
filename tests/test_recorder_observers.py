"""Issue 47 (observe/): the Recorder's observers share one protocol (observe/__init__.py) and sit in
one ordered list, hooks.OBSERVERS. An observer added to that list, and nowhere else, is built,
attached to the models for the run, called around every recorded forward, writes its part of
the recording at the end and leaves no hook behind, on a real `record_clip` of the demo pair."""
from __future__ import annotations

from pathlib import Path

import pytest

from specdec_core.api import load_backend, prepare
from specdec_core.decoding.config import DecodeConfig
from specdec_core.decoding.decoder import SpeculativeDecoder
from specdec_core.recorder.driver.clip import DEFAULTS, record_clip
from specdec_core.recorder.observe import Observer, hooks

CLIP = str(Path(__file__).resolve().parents[1] / "sample_audio" / "angry_01.wav")


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


def hook_count(*models) -> int:
    mods = {id(m): m for model in models for m in model.modules()}.values()
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in mods)


class Probe(Observer):
    """Its own forward hook on each model, and what the protocol hands it."""
    built: list = []

    def __init__(self, recorder):
        super().__init__(recorder)
        self.hooked = {"edge": 0, "cloud": 0}
        self.pre_n = self.post_n = 0
        self.closed = False
        Probe.built.append(self)

    def attach(self):
        return [m.register_forward_hook(self._hit(role)) for role, m in self.r.models.items()]

    def _hit(self, role):
        def hook(module, args, output):
            self.hooked[role] += 1
        return hook

    def pre(self, f, call):
        assert call.role == f["model"] and "rows" not in f
        self.pre_n += 1

    def post(self, f, call):
        assert "rows" in f            # the entries before it (Rows) have written theirs
        self.post_n += 1

    def close(self):
        self.closed = True

    def finish(self, recording):
        recording["probe"] = {"hooked": dict(self.hooked), "pre": self.pre_n, "post": self.post_n}


def test_an_observer_in_the_list_is_attached_called_finished_and_detached(demo, monkeypatch):
    monkeypatch.setattr(hooks, "OBSERVERS", hooks.OBSERVERS + (Probe,))
    before = hook_count(demo.edge, demo.cloud)
    during = []
    cfg = DecodeConfig(max_new_tokens=16)

    def loop(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
        during.append(hook_count(edge, cloud))
        return SpeculativeDecoder(demo, cfg, dependence=False).run(prepare(demo, CLIP, cfg)).token_ids

    Probe.built.clear()
    res = record_clip(loop, Path(__file__), demo, CLIP, dict(DEFAULTS, max_new_tokens=16))
    assert res["ok"], res.get("error")
    rec, (probe,) = res["recording"], Probe.built
    fwd = rec["forwards"]
    assert rec["probe"]["pre"] == rec["probe"]["post"] == len(fwd) > 2
    assert rec["probe"]["hooked"] == {r: sum(f["model"] == r for f in fwd) for r in ("edge", "cloud")}
    assert min(rec["probe"]["hooked"].values()) > 0 and probe.closed
    assert during[0] >= before + 2 * 2 + 2       # the Recorder's own two per model, the Probe's one
    assert hook_count(demo.edge, demo.cloud) == before        # every observer's hooks removed
    # the fields of the other observers, in the list's order, are written as before it
    assert list(rec)[list(rec).index("forwards") + 1:][:4] == ["layers", "drafter", "draft_shape", "probe"]
