"""Issue 47 (4), one record-one-clip path: a user's function (record_clip) and the built-in
decoder (judged_stream) are recorded by the same steps (driver/clip.recorded: seed, observers,
kept configs, dtype, analysis), so the built-in decoder handed to record_clip as a user's loop
gets the same trace and findings as judged_stream gives it; record_clip's seed reaches torch's
global generator."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from specdec_core.api import load_backend, prepare
from specdec_core.decoding.config import DecodeConfig
from specdec_core.decoding.decoder import SpeculativeDecoder
from specdec_core.recorder.checks.text.trace import codes, d
from specdec_core.recorder.driver.builtin import declared_knobs, judged_stream
from specdec_core.recorder.driver.clip import DEFAULTS, record_clip

ROOT = Path(__file__).resolve().parents[1]
CLIP = str(ROOT / "sample_audio" / "angry_01.wav")
# registered for a declared task only: the built-in declares its prompt type, a user's loop not
TASK = {c for fn in d.TASK_CHECKS for c in codes(fn)}


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


def _untimed(x):
    """A trace dict without wall times (two runs of one decode differ only in those), the
    declarations (the built-in declares its prompt type) and the findings (compared below)."""
    if isinstance(x, dict):
        return {k: _untimed(v) for k, v in x.items() if not (k.endswith("_s") or "ms" in k or k in (
            "time_split", "tokens_per_s", "declared", "diagnostics"))}
    return [_untimed(v) for v in x] if isinstance(x, list) else x


@pytest.mark.parametrize("cfg", [DecodeConfig(faults=["no_resync"], max_new_tokens=40),
                                 DecodeConfig(temperature=0.8, verify="sampling", seed=5, max_new_tokens=24)],
                         ids=["greedy_no_resync", "sampling"])
def test_the_builtin_decoder_as_a_users_loop_is_judged_as_the_builtin_path(demo, cfg):
    prompt = prepare(demo, CLIP, cfg)

    def builtin_loop(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
        return SpeculativeDecoder(demo, cfg, dependence=False).run(prompt).token_ids

    knobs = dict(declared_knobs(demo, cfg), prompt_type=cfg.prompt_type)
    user = record_clip(builtin_loop, Path(__file__), demo, CLIP, knobs, seed=cfg.seed)
    got: dict = {}
    *_, done = judged_stream(demo, prompt, cfg, out=got)
    own = done["trace"]
    assert user["ok"] and user["token_ids"] == own.token_ids
    assert _untimed(user["trace"]) == _untimed(got["trace"].to_dict())
    assert user["recording"]["seed"] == got["recording"]["seed"] == cfg.seed
    assert user["recording"]["dtype"] == got["recording"]["dtype"] == "float32"
    key = lambda f: (f["code"], f["severity"], f["title"], f["detail"])   # noqa: E731
    builtin = [key(f) for f in own.diagnostics if f["code"] not in TASK]
    assert [key(f) for f in user["findings"]] == builtin
    if cfg.faults:
        assert builtin and builtin[0][:2] == ("stale_cache", "error")


def test_record_clip_seeds_torchs_global_generator(demo):
    """A loop that samples from torch's global generator (torch.rand / multinomial without a
    generator, as lucidrains' gumbel noise) draws the same on the same seed, clip after clip."""
    drawn = []

    def sampling_loop(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=()):
        drawn.append(torch.rand(4).tolist())
        return cloud.generate(input_ids, max_new_tokens=4, do_sample=False)[0, input_ids.shape[1]:]

    for seed in (7, 8, 7):
        torch.rand(3)                          # whatever ran before: the seed decides
        assert record_clip(sampling_loop, Path(__file__), demo, CLIP, dict(DEFAULTS), seed=seed)["ok"]
    torch.manual_seed(7)
    assert drawn[0] == drawn[2] == torch.rand(4).tolist() and drawn[1] != drawn[0]


def test_declared_knobs_are_the_engines_names_types_and_ranges(demo, capsys, tmp_path):
    """One vocabulary: `record --set` declares the engine's knobs by the engine's names, read and
    range-checked by the engine's Knob (decoding/knobs.py), as the built-in decoder declares the
    same config (stop_at_first_sentence: as the ids it stops on); `--set seed=N` is `--seed N`;
    a knob outside the vocabulary is one line naming every valid one."""
    import json

    from specdec_core.cli import main
    from specdec_core.decoding.config import KNOBS as ENGINE
    from specdec_core.recorder.driver.clip import KNOBS, parse_sets

    cfg = DecodeConfig(k=3, temperature=0.7, verify="rank", rank_threshold=7, max_new_tokens=24,
                       min_new_tokens=4, prompt_type="concise", stop_at_first_sentence=False)
    sets = ["k=3", "temperature=0.7", "verify=rank", "rank_threshold=7", "max_new_tokens=24",
            "min_new_tokens=4", "prompt_type=concise", "stop_at_first_sentence=false"]
    assert parse_sets(sets) == declared_knobs(demo, cfg)
    assert all(KNOBS[n] is ENGINE[n] for n in KNOBS if n in ENGINE)
    correct = str(ROOT / "examples" / "decoders" / "correct.py")
    for bad, said in (("k=40", "k must be in [1, 32], got 40"), ("verify=fast", "verify must be one of"),
                      ("draft_top_p=0", "draft_top_p must be in (0, 1], got 0"), ("kk=3", "KEY one of k, ")):
        assert main(["record", correct, CLIP, "--set", bad]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and said in err and "Traceback" not in err, err
    assert all(n in err for n in KNOBS)
    recs = []
    for extra in (["--set", "seed=3"], ["--seed", "3"]):
        argv = ["record", correct, CLIP, "--set", "max_new_tokens=12", "--set", "stop_at_first_sentence=1"]
        assert main([*argv, *extra, "--out", str(tmp_path / "r.json")]) == 0
        recs.append(json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["results"][0]["recording"])
    builtin = declared_knobs(demo, DecodeConfig())["stop_at_first_sentence"]
    assert recs[0]["seed"] == recs[1]["seed"] == 3 and recs[0]["declared"] == recs[1]["declared"]
    got: dict = {}
    list(judged_stream(demo, prepare(demo, CLIP, DecodeConfig(max_new_tokens=12)), DecodeConfig(max_new_tokens=12), out=got))
    assert builtin is True and recs[0]["declared"]["sentence_ids"] == got["recording"]["declared"]["sentence_ids"]
