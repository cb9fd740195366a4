"""Audio dependence per token (issue 28): the counterfactual prompts, the one extra cloud forward,
the acceptance split, `edge_mishears` on a loop whose edge gets no audio (and not on the correct
loop), and the views that show it. Real demo models, real clips, the real tiny Omni thinkers."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from components.plots import entropy_figure
from components.token_view import COLOURINGS, dependence_fill, rank_fill, render_tokens
from specdec_core.analysis.audio_dependence import (THRESHOLD_NATS, acceptance_by_dependence,
                                                    check_edge_mishears, judged_drafts)
from specdec_core.api import load_backend, prepare
from specdec_core.audio import conditions
from specdec_core.decoding.config import DecodeConfig
from specdec_core.decoding.decoder import SpeculativeDecoder
from specdec_core.decoding.dependence import _logits, audio_dependence
from specdec_core.recorder.driver.clip import load_function, record_clip

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "decoders"
EMOTION_CHARS = set("".join(w for ws in conditions.EMOTION_WORDS.values() for w in ws))
PUNCT = set("，。、：；！？")


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


@pytest.fixture(scope="module")
def angry(demo):
    """One decode of a clip, with its prompt."""
    prompt = prepare(demo, ROOT / "sample_audio" / "angry_01.wav", DecodeConfig())
    return prompt, SpeculativeDecoder(demo, DecodeConfig()).run(prompt)


def test_demo_counterfactual_moves_only_the_prosody_tokens(demo, angry):
    prompt, _ = angry
    cf = demo.counterfactual_inputs(prompt)
    assert cf.length == prompt.length
    a, b = prompt.input_ids[0].tolist(), cf.input_ids[0].tolist()
    changed = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    assert changed, "an angry clip's prosody is not the middle bins"
    middle = {demo.tokenizer.convert_tokens_to_ids(conditions.token(f, v[len(v) // 2]))
              for f, v in conditions.FEATURES.items()}
    cond = {demo.tokenizer.convert_tokens_to_ids(t) for t in conditions.all_condition_tokens()}
    assert all(a[i] in cond and b[i] in middle for i in changed)


def test_dependence_in_the_trace_and_output_unchanged(demo, angry):
    prompt, tr = angry
    deps = [t.audio_dependence for t in tr.tokens]
    assert all(isinstance(v, float) and v >= 0 for v in deps)
    assert max(deps) > 1.0 and min(deps) < 0.01          # some tokens hang on the clip, some don't
    assert tr.metrics["audio_dependence"]["forwards"] == 1  # one batched forward of two rows
    d = tr.to_dict()["tokens"][0]
    assert "audio_dependence" in d and "audio_free_id" in d
    # the extra forward runs after the decode: a decode without it gives the same tokens
    bare = SpeculativeDecoder(demo, DecodeConfig(), trace=False).run(prompt)
    assert bare.token_ids == tr.token_ids
    assert all(t.audio_dependence is None for t in bare.tokens)
    split = tr.metrics["acceptance_by_dependence"]
    assert split["threshold_nats"] == THRESHOLD_NATS
    for cls in ("audio", "other"):
        s = split[cls]
        assert s["judged"] > 0 and 0 <= s["acceptance_rate"] <= 1
        assert s["mean_accepted_length"] == pytest.approx(1 + s["accepted"] / s["rounds"], abs=1e-3)
        assert s["drafts"] >= s["judged"] and s["per_position_acceptance"]
    n = sum(split[c]["judged"] for c in ("audio", "other"))
    assert n == sum(t.source in ("accepted", "corrected") for t in tr.tokens)


def test_emotion_words_depend_on_the_audio_more_than_punctuation(demo):
    """On clips not used to set the threshold (sample_audio/unheard)."""
    emo, punct = [], []
    for name in ("sad_f4.wav", "surprise_annie.wav"):
        prompt = prepare(demo, ROOT / "sample_audio" / "unheard" / name, DecodeConfig())
        tr = SpeculativeDecoder(demo, DecodeConfig()).run(prompt)
        emo += [t.audio_dependence for t in tr.tokens if t.text in EMOTION_CHARS]
        punct += [t.audio_dependence for t in tr.tokens if t.text in PUNCT]
    assert emo and punct
    assert sum(emo) / len(emo) > 10 * (sum(punct) / len(punct))
    assert sum(emo) / len(emo) > THRESHOLD_NATS > max(punct)


def _trace(blocks, deps, free=None, rejected_ids=None):
    """A trace dict from blocks of sources, e.g. [["accepted", "corrected"], ...]."""
    toks, rounds, rej, i = [], [], [], 0
    for r, block in enumerate(blocks):
        rounds.append({"round": r, "verified": True, "drafted": 4,
                       "accepted": sum(s == "accepted" for s in block), "start": i})
        for s in block:
            toks.append({"i": i, "id": 1, "source": s, "round": r, "audio_dependence": deps[i],
                         "audio_free_id": (free or {}).get(i, 7)})
            if s == "corrected":
                rej.append({"round": r, "at": i, "id": (rejected_ids or {}).get(i, 9), "source": "rejected"})
            i += 1
    return {"tokens": toks, "rounds": rounds, "rejected": rej}


def test_split_and_finding_on_built_traces():
    # 8 blocks: audio-dependent first drafts rejected, the rest accepted
    blocks = [["corrected", "accepted"]] * 0 + [["accepted", "accepted", "accepted", "corrected"]] * 8
    deps = [0.0, 0.0, 0.0, 2.0] * 8
    tr = _trace(blocks, deps, rejected_ids={i: 7 for i in range(3, 32, 4)})   # = audio-free choice
    split = acceptance_by_dependence(tr)
    assert split["audio"]["acceptance_rate"] == 0 and split["other"]["acceptance_rate"] == 1
    assert split["audio"]["per_position_acceptance"] == [None, None, None, 0.0]
    assert split["other"]["mean_accepted_length"] == 4.0
    [f] = check_edge_mishears(tr)
    assert f["code"] == "edge_mishears" and f["severity"] == "warning"
    assert "8 judged" in f["detail"] and "share the cloud's audio encoding" in f["fix"]
    assert "input_features" in f["cause"]
    # rejected drafts that are NOT the audio-free choice: a weaker listener, not a deaf one
    assert check_edge_mishears(_trace(blocks, deps)) == []
    # too little evidence
    assert check_edge_mishears(_trace(blocks[:3], deps[:12], rejected_ids={3: 7, 7: 7, 11: 7})) == []
    # no dependence measured: no split, no finding
    bare = _trace(blocks, [None] * 32)
    assert acceptance_by_dependence(bare) is None and check_edge_mishears(bare) == []
    assert len(judged_drafts(tr)) == 32


def _record(demo, name, clip):
    fn, _ = load_function(f"{EXAMPLES / name}.py:decode")
    knobs = {"k": 4, "max_new_tokens": 128, "prompt_type": "detailed"}
    res = record_clip(fn, EXAMPLES / f"{name}.py", demo, str(ROOT / "sample_audio" / clip), knobs)
    assert res["ok"], res.get("error")
    return res


def test_edge_without_audio_mishears_and_the_correct_loop_does_not(demo):
    deaf = _record(demo, "edge_no_audio", "angry_01.wav")
    good = _record(demo, "correct", "angry_01.wav")
    assert deaf["token_ids"] == good["token_ids"]            # the cloud verifies everything
    hit = [f for f in deaf["findings"] if f["code"] == "edge_mishears"]
    assert hit and hit[0]["severity"] == "warning"
    # the root first: the edge's prompt lost the clip's condition tokens (no cache or context
    # error: the edge's own prompt positions are its own); the mishearing is nested under it
    assert [(f["code"], f["severity"]) for f in deaf["findings"] if not f["explained_by"]] == [
        ("audio_missing", "warning")], deaf["findings"]
    assert hit[0]["explained_by"] == "audio_missing"
    ev = hit[0]["evidence"]
    assert ev["audio_rejection"] > 2 * ev["other_rejection"] and ev["p_value"] < 0.01
    assert not [f for f in good["findings"] if f["code"] == "edge_mishears"]
    for res in (deaf, good):
        split = res["trace"]["metrics"]["acceptance_by_dependence"]
        assert split["audio"]["judged"] and split["other"]["judged"]
        assert all(t["audio_dependence"] is not None for t in res["trace"]["tokens"])
    assert (deaf["trace"]["metrics"]["acceptance_by_dependence"]["audio"]["acceptance_rate"]
            < good["trace"]["metrics"]["acceptance_by_dependence"]["audio"]["acceptance_rate"])


def test_views_colour_by_dependence_and_rank(angry):
    tr = angry[1].to_dict()
    assert COLOURINGS == ("source", "audio dependence", "cloud rank")
    plain = render_tokens(tr)
    assert "--ss-dep:" in plain and "; background:" not in plain
    dep = render_tokens(tr, colour="audio dependence")
    hot = max(tr["tokens"], key=lambda t: t["audio_dependence"])
    assert f"background: {dependence_fill(hot['audio_dependence'])}" in dep
    assert dependence_fill(0.0) == "#FFFFFF" and dependence_fill(None) is None
    assert rank_fill(1) == rank_fill(10) != rank_fill(11) != rank_fill(101) != rank_fill(1001)
    assert rank_fill(None, "bonus") == rank_fill(1) and rank_fill(None, "draft") != rank_fill(1)
    assert "ss-key-rank" in render_tokens(tr, colour="cloud rank")
    names = [t.name for t in entropy_figure(tr).data]
    assert "audio dependence" in names
    tr2 = dict(tr, tokens=[dict(t, audio_dependence=None) for t in tr["tokens"]])
    assert "audio dependence" not in [t.name for t in entropy_figure(tr2).data]


def test_omni_counterfactual_silences_features_in_one_batched_forward():
    from specdec_core.audio.loading import load_audio
    from specdec_core.backends.omni import OmniBackend
    from devtools.omni_tiny import (omni_processor, omni_tokenizer, perturb, tiny_thinker,
                                    tiny_thinker_config)

    tok = omni_tokenizer()
    proc = omni_processor(tok)
    cfg = tiny_thinker_config(tok, 160, hidden=64, layers=2, init=0.3)
    cloud, edge = tiny_thinker(cfg, seed=1), tiny_thinker(cfg, seed=1)
    perturb(edge, 0.02, seed=7)
    b = OmniBackend(edge=edge, cloud=cloud, processor=proc)
    p = b.build_inputs(load_audio(ROOT / "sample_audio" / "angry_01.wav"), "concise")
    cf = b.counterfactual_inputs(p)
    f, g = p.prefill_kwargs["input_features"], cf.prefill_kwargs["input_features"]
    assert torch.equal(cf.input_ids, p.input_ids) and f.shape == g.shape and not torch.equal(f, g)
    valid = p.prefill_kwargs["feature_attention_mask"][0].bool()
    assert torch.equal(g[0][:, ~valid], f[0][:, ~valid])                   # padding untouched
    assert g[0][:, valid].std() == 0                                       # silence is flat
    ids = [5, 9, 11, 13, 17, 19]
    d = audio_dependence(b, p, ids)
    assert d["forwards"] == 1 and len(d["values"]) == len(ids) and max(d["values"]) > 0
    # the batched rows give what two separate forwards give (mrope positions per row)
    gen = torch.tensor([ids[:-1]])
    rows = [(torch.cat([x.input_ids, gen], 1), dict(x.prefill_kwargs)) for x in (p, cf)]
    w = _logits(b.cloud, rows[:1], b.shared_vocab)[0][p.length - 1:]
    wo = _logits(b.cloud, rows[1:], b.shared_vocab)[0][p.length - 1:]
    lp, lq = torch.log_softmax(w, -1), torch.log_softmax(wo, -1)
    sep = (lp.exp() * (lp - lq)).sum(-1).tolist()
    assert d["values"] == pytest.approx(sep, abs=1e-3)


def test_backends_without_a_counterfactual_give_none(demo):
    from specdec_core.backends.base import Backend

    assert Backend().counterfactual_inputs(None) is None

    class NoAudio:
        cloud, shared_vocab = demo.cloud, None

    assert audio_dependence(NoAudio(), None, [1, 2]) is None


def test_pooled_over_clips_finds_what_one_clip_cannot():
    from specdec_core.analysis.audio_dependence import pooled, pooled_edge_mishears

    blocks = [["accepted", "accepted", "accepted", "corrected"]] * 3 + [["accepted"] * 4] * 3
    deps = [0.0, 0.0, 0.0, 2.0] * 3 + [0.0] * 12
    one = _trace(blocks, deps, rejected_ids={3: 7, 7: 7, 11: 7})
    assert check_edge_mishears(one) == []                     # 3 audio-dependent drafts: too few
    both = pooled([one, one])
    assert len(both["tokens"]) == 48 and {r["at"] for r in both["rejected"]} == {3, 7, 11, 27, 31, 35}
    [f] = pooled_edge_mishears([one, one])
    assert f["code"] == "edge_mishears" and "over 2 clips" in f["title"]
    assert pooled_edge_mishears([one]) == []
