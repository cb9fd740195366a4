"""Issue 47.7 (core): the twins merged into one each keep both callers' behaviour — acceptance by
draft position (our rounds and a served engine's steps), the one reading of a server URL, the
one model-folder config / chat-template / tokenizer reader, and the one-round slot call."""
from __future__ import annotations

import json

import pytest

from specdec_core.analysis.metrics import by_position
from specdec_core.audit.checks import Run, by_draft_position
from specdec_core.audit.served import Served
from specdec_core.backends.cloud_policy import canonical
from specdec_core.backends.hf import chat_template, config_dict, load_tokenizer
from specdec_core.backends.openai_client import CompletionsClient, RemoteError, token_id
from specdec_core.errors import BackendError
from specdec_core.slots import RoundSlots


def test_acceptance_by_position_is_one_rule_for_rounds_and_served_steps():
    steps = [(2, 3), (0, 2), (3, 3), (1, 1)]          # (accepted, drafted)
    assert by_position(steps) == [(4, 3), (3, 2), (2, 1)]
    assert by_position([]) == []
    served = Served([1], [5] * 12, [], {"per_step_accepted": [a for a, _ in steps],
                                        "per_step_drafted": [d for _, d in steps]})
    got = by_draft_position([Run("r", served)])
    assert got == [{"position": 1, "drafted": 4, "accepted": 3, "rate": 0.75},
                   {"position": 2, "drafted": 3, "accepted": 2, "rate": round(2 / 3, 4)},
                   {"position": 3, "drafted": 2, "accepted": 1, "rate": 0.5}]


def test_the_client_reads_a_url_as_the_cloud_policy_does():
    for url in ("127.0.0.1:8000", "http://LocalHost:8000/", "https://x.example"):
        c = CompletionsClient(url)
        assert c.url == canonical(url) and c.host == c.url.split("://")[1].rsplit(":", 1)[0]
    for bad in ("ftp://a:1", "http://a:99999", "http://"):
        with pytest.raises(RemoteError, match="URL must look like http://HOST:PORT") as e:
            CompletionsClient(bad, role="served engine")
        assert "\n" not in str(e.value) and str(e.value).startswith("served engine URL")
    assert token_id("token_id:42") == 42 and token_id(7) == 7


def test_one_folder_reader_for_configs_templates_and_tokenizers(tmp_path):
    whole = tmp_path / "published"
    whole.mkdir()
    (whole / "config.json").write_text(json.dumps(
        {"model_type": "qwen2_5_omni", "thinker_config": {"model_type": "qwen2_5_omni_thinker", "x": 1}}))
    kind, cfg = config_dict(str(whole), "cloud")
    assert kind == "qwen2_5_omni" and cfg == {"model_type": "qwen2_5_omni_thinker", "x": 1}
    with pytest.raises(BackendError, match="cannot read the edge model config from") as e:
        config_dict(str(tmp_path / "empty"), "edge")
    assert "\n" not in str(e.value)
    assert chat_template(str(whole)) is None
    (whole / "chat_template.json").write_text(json.dumps({"chat_template": "{{ json }}"}))
    assert chat_template(str(whole)) == "{{ json }}"
    (whole / "chat_template.jinja").write_text("{{ jinja }}")
    assert chat_template(str(whole)) == "{{ jinja }}"          # the .jinja file wins
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "NoSuchTokenizer"}))
    with pytest.raises(BackendError, match="cannot load the edge tokenizer from") as e:
        load_tokenizer(str(broken), "edge")
    assert "\n" not in str(e.value)


def test_a_slot_call_is_one_round_and_always_gives_the_slot_back():
    slots = RoundSlots(1)
    assert slots.call(lambda: (slots.busy(), slots.waiting()), owner="a") == (1, 0)
    assert slots.busy() == 0 and slots.grants == ["a"]
    with pytest.raises(ZeroDivisionError):
        slots.call(lambda: 1 / 0)
    assert slots.busy() == 0
