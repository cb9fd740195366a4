"""LiveTrace folds the decoder's events into the same trace the run ends with, and its streamed
text follows the final text's rule (no <|im_end|> mid-stream)."""
from __future__ import annotations

from pathlib import Path

from specdec_core.api import LiveTrace, load_backend, prepare, stream_prompt
from specdec_core.decoding.config import DecodeConfig

CLIP = str(Path(__file__).resolve().parents[1] / "sample_audio" / "happy_01.wav")


def test_live_trace_matches_the_final_trace_and_text_rule():
    demo = load_backend("demo")
    # special_text_stop decodes past <|im_end|> into the next chat turn
    cfg = DecodeConfig(faults=["special_text_stop"], max_new_tokens=60)
    live, plain, texts = LiveTrace(cfg.to_dict(), demo.tokenizer), LiveTrace(cfg.to_dict()), []
    for ev in stream_prompt(demo, prepare(demo, CLIP, cfg), cfg):
        if ev["type"] == "done":
            partial = {k: list(live.trace[k]) for k in ("tokens", "rejected", "rounds", "warnings")}
        live.add(ev)
        plain.add(ev)
        texts.append(live.text())
    final = live.trace
    assert live.done and final["ended_by"] == "max_tokens"
    # the fold is exactly the final trace, less what is measured after the decode (the audio
    # dependence: one cloud forward over the finished output, decoding/dependence.py)
    after = ("audio_dependence", "audio_free_id")
    assert any(t["audio_dependence"] is not None for t in final["tokens"])
    assert all(t["audio_dependence"] is None for t in partial["tokens"])
    final_tokens = [{k: v for k, v in t.items() if k not in after} for t in final["tokens"]]
    assert [{k: v for k, v in t.items() if k not in after} for t in partial["tokens"]] == final_tokens
    for k in ("rejected", "rounds", "warnings"):
        assert partial[k] == final[k], k
    assert any("<|im_end|>" in t["text"] for t in final["tokens"])
    assert not any("<|im_end|>" in t for t in texts)
    assert texts[-1] == final["text"] and texts[-2] == final["text"]
    # without a tokenizer the token texts are joined as they are
    assert "<|im_end|>" in "".join(t["text"] for t in plain.trace["tokens"])
