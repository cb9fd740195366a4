"""One cloud-only greedy decoder (issue 55.6): the served-engine audit's reference (and its
replayed draft model) is decoding/baseline.greedy, the decoder `run --baseline` uses, with the two
options the audit needs: no stop (exactly n tokens, EOS included) and a vocabulary bound."""
from __future__ import annotations

import pytest

from specdec_core.api import load_backend, prepare
from specdec_core.audit.served import reference_local
from specdec_core.decoding import baseline
from specdec_core.decoding.config import DecodeConfig


@pytest.fixture(scope="module")
def demo():
    return load_backend("demo")


def test_audit_reference_runs_past_eos_and_is_the_baseline_decoder(demo):
    prompt = [1] + list(range(5, 25))      # the demo cloud says EOS (2) at its 4th token here
    ids, top = reference_local(demo, prompt, 24)
    assert len(ids) == len(top) == 24
    assert 2 in ids[:-1]                    # went on after EOS: the served run's length bounds it
    assert [max(t, key=t.get) for t in top] == ids
    stopped, _ = baseline.greedy(demo.cloud, prompt, 24, list(demo.stop_ids))
    assert stopped == ids[:ids.index(2) + 1]    # the same decoder, with the stops: ends at EOS


def test_vocab_bound_is_never_chosen(demo):
    prompt = [1, 7, 9, 11]
    free, _ = baseline.greedy(demo.cloud, prompt, 12)
    bound, logits = baseline.greedy(demo.cloud, prompt, 12, keep_logits=True, vocab=500)
    assert max(free) >= 500 and max(bound) < 500
    assert bound == logits[:, :500].argmax(-1).tolist()     # the raw logits kept, the bound applied
    assert logits.shape == (12, demo.cloud.config.vocab_size)


def test_cloud_only_is_the_same_decoder(demo):
    cfg = DecodeConfig(max_new_tokens=16, min_new_tokens=0, stop_at_first_sentence=False)
    p = prepare(demo, "sample_audio/angry_01.wav", cfg)
    res = baseline.cloud_only(demo, p, cfg)
    ids, _ = baseline.greedy(demo.cloud, p.input_ids, 16, list(demo.stop_ids), **p.prefill_kwargs)
    assert res["token_ids"] == ids
