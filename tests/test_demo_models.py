"""The shipped demo pair: loadable offline, small, and the cloud model reads its condition tokens."""
import itertools
import json

import pytest
import torch

from specdec_core.audio import conditions as C
from specdec_core.backends.base import Backend, PromptInputs
from specdec_core.backends.demo import MODELS_DIR, DemoBackend
from specdec_core.demo import corpus as K
from specdec_core.errors import ConfigError


def all_bin_combinations() -> list[dict[str, str]]:
    """Every combination of feature bins (243), earlier features varying slowest."""
    return [dict(zip(C.FEATURES, vs)) for vs in itertools.product(*C.FEATURES.values())]


@pytest.fixture(scope="module")
def backend():
    torch.set_num_threads(1)
    return DemoBackend()


def greedy(backend, model, inputs, n=128):
    out = model.generate(inputs.input_ids, max_new_tokens=n, do_sample=False,
                         eos_token_id=backend.stop_ids, pad_token_id=backend.tokenizer.pad_token_id)
    return out[0, inputs.length:].tolist()


def cloud_text(backend, cond_tokens, prompt_type):
    ids = greedy(backend, backend.cloud, backend.build_inputs_from_tokens(cond_tokens, prompt_type))
    return ids, backend.tokenizer.decode(ids, skip_special_tokens=True)


def test_weights_are_small_safetensors():
    files = sorted(MODELS_DIR.glob("*/model.safetensors"))
    assert [f.parent.name for f in files] == ["cloud", "edge", "head"]   # head: issue 35
    assert sum(f.stat().st_size for f in files) <= 25 * 2**20
    assert not list(MODELS_DIR.glob("*/*.bin"))
    report = json.loads((MODELS_DIR / "train_report.json").read_text())
    assert set(report["models"]) == {"cloud", "edge", "head"}


def test_backend_shape(backend):
    assert isinstance(backend, Backend) and backend.name == "demo"
    tok = backend.tokenizer
    assert backend.stop_ids == [tok.convert_tokens_to_ids("<|im_end|>"), tok.eos_token_id]
    for m in (backend.edge, backend.cloud):
        assert not m.training and next(m.parameters()).dtype == torch.float32
        assert m.config.vocab_size == len(tok)
    n = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert n(backend.edge) * 3 < n(backend.cloud)  # the edge is clearly weaker
    # Depth sets the forward cost of models this small on a CPU: one edge layer against a deep
    # cloud is what makes speculation pay (c is measured by `make bench`, not here).
    assert backend.edge.config.num_hidden_layers == 1
    assert backend.cloud.config.num_hidden_layers >= 8


def test_prompt_inputs(backend):
    cond = C.condition_tokens(C.PROFILES["sad"])
    inp = backend.build_inputs_from_tokens(cond, "concise")
    assert isinstance(inp, PromptInputs) and inp.input_ids.dtype == torch.long
    text = backend.tokenizer.decode(inp.input_ids[0])
    assert text == K.prompt_text(cond, "concise") and text.endswith("<|im_start|>assistant\n")
    assert inp.info["condition_tokens"] == cond
    with pytest.raises(ConfigError, match="prompt_type"):
        backend.build_inputs_from_tokens(cond, "verbose")
    with pytest.raises(ConfigError, match="condition token"):
        backend.build_inputs_from_tokens(["<pitch_huge>"], "detailed")


@pytest.mark.parametrize("prompt_type", C.PROMPT_TYPES)
def test_cloud_greedy_names_each_profile_emotion(backend, prompt_type):
    lo, hi = C.LENGTH_BANDS[prompt_type]
    right = 0
    for label in C.LABELS:
        ids, text = cloud_text(backend, C.condition_tokens(C.PROFILES[label]), prompt_type)
        assert ids[-1] in backend.stop_ids, text          # stops by itself, on an id
        assert text.endswith("。") and text.count("。") == 1, text
        assert lo <= K.count_hanzi(text) <= hi, text
        words = K.emotion_words_in(text)
        assert len(words) == 1, text
        right += words[0][0] == label
    assert right >= 5


def test_cloud_follows_the_rule_on_random_cue_combinations(backend):
    # Not only the six profiles: any combination of bins gets the rule's emotion and only the
    # cues that were measured.
    import random
    rng = random.Random(2024)
    combos = rng.sample(all_bin_combinations(), 24)
    right = consistent = 0
    for bins in combos:
        _, text = cloud_text(backend, C.condition_tokens(bins), "detailed")
        words = K.emotion_words_in(text)
        right += bool(words) and words[0][0] == C.label_for(bins)
        consistent += all(bins[f] == b for f, b, _ in K.cue_hits(text))
    assert right >= 20, right
    assert consistent >= 22, consistent


def test_changing_only_condition_tokens_changes_the_emotion(backend):
    named = {}
    for label in ("angry", "sad"):
        _, text = cloud_text(backend, C.condition_tokens(C.PROFILES[label]), "detailed")
        named[label] = K.emotion_words_in(text)[0][0]
    assert named == {"angry": "angry", "sad": "sad"}


def test_cloud_continues_into_template_when_not_stopped(backend):
    # The fault the tool demonstrates: ignore the stop id and the next user turn leaks out.
    inp = backend.build_inputs_from_tokens(C.condition_tokens(C.PROFILES["happy"]), "concise")
    out = backend.cloud.generate(inp.input_ids, max_new_tokens=40, do_sample=False,
                                 eos_token_id=None, pad_token_id=backend.tokenizer.pad_token_id)
    text = backend.tokenizer.decode(out[0, inp.length:], skip_special_tokens=True)
    assert "user" in text.split("。", 1)[1]


def test_shipped_tokenizer_is_the_training_tokenizer(backend):
    # transformers re-creates qwen2 tokenizers from vocab + merges; the ids must survive that.
    import random

    from specdec_core.demo.tokenizer import build_tokenizer
    built = build_tokenizer()
    doc, _ = K.document(random.Random(5), second_turn_p=1.0)
    assert backend.tokenizer(doc)["input_ids"] == built(doc)["input_ids"]
    assert type(backend.tokenizer).__name__ == "Qwen2Tokenizer"


def test_build_inputs_reads_prosody_from_audio(backend):
    import numpy as np

    from specdec_core.audio.loading import load_audio
    sr = 16000
    t = np.arange(int(1.5 * sr)) / sr
    # a loud high tone, syllable-like bursts: the prompt must carry the extracted bins
    x = 0.5 * np.sin(2 * np.pi * 260 * t) * (np.sin(2 * np.pi * 4 * t) > 0)
    inp = backend.build_inputs(load_audio((sr, x.astype(np.float32))), "detailed")
    bins = inp.info["bins"]
    assert set(bins) == set(C.FEATURES) and set(inp.info["prosody"]) >= set(C.FEATURES)
    assert inp.info["condition_tokens"] == C.condition_tokens(bins)
    assert "".join(C.condition_tokens(bins)) + "<detailed>" in inp.info["prompt"]
    assert backend.tokenizer.decode(inp.input_ids[0]) == inp.info["prompt"]


def test_missing_weights_is_a_one_line_backend_error(tmp_path):
    from specdec_core.errors import BackendError
    with pytest.raises(BackendError, match="demo edge model missing") as e:
        DemoBackend(tmp_path)
    assert "\n" not in str(e.value)
