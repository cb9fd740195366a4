"""The built-in SpeculativeDecoder run under the Recorder, so the bug zoo is diagnosed by the
same blind checks as a user's decoder (nothing here reads cfg.faults)."""
from __future__ import annotations

from specdec_core.decoding.config import DecodeConfig
from specdec_core.decoding.decoder import SpeculativeDecoder
from specdec_core.decoding.dependence import audio_dependence
from specdec_core.decoding.vocab import TokenClasses
from specdec_core.recorder.analyze import analyze
from specdec_core.recorder.hooks import Recorder


def declared_knobs(backend, cfg: DecodeConfig) -> dict:
    """What a user of the built-in decoder declares: the knobs as set (the faults are bugs in
    the code, not declarations)."""
    d = {"k": cfg.k, "temperature": cfg.temperature, "verify": cfg.verify,
         "max_new_tokens": cfg.max_new_tokens, "min_new_tokens": cfg.min_new_tokens}
    if cfg.verify == "rank":
        d["rank_threshold"] = cfg.rank_threshold
    if cfg.stop_at_first_sentence:
        d["sentence_ids"] = sorted(TokenClasses.for_tokenizer(backend.tokenizer).ids("sentence_end"))
    if cfg.entropy_threshold is not None:  # declared in nats, as the decoder resolves it
        from specdec_core.decoding.run import logits_width
        edge = backend.make_runner(backend.edge, "edge")
        d["entropy_threshold"] = cfg.threshold_nats(logits_width(edge))
    return d


def record_builtin(backend, prompt, cfg: DecodeConfig):
    """Run the built-in decoder on `prompt` under the Recorder.
    Returns (recording, recorded trace, findings, the decoder's own trace)."""
    # the audio-dependence forward runs after the hooks are off: inside them it would read as
    # a cloud forward verifying the whole output
    dec = SpeculativeDecoder(backend, cfg, dependence=False)
    with Recorder(backend.edge, backend.cloud, backend.tokenizer, prompt.input_ids,
                  backend.stop_ids, **declared_knobs(backend, cfg)) as rec:
        own = dec.run(prompt)
    recording = rec.finish(own.token_ids)
    recording["backend"] = backend.name
    dep = audio_dependence(backend, prompt, own.token_ids)
    trace, found = analyze(recording, backend.tokenizer, prompt.info, dep)
    return recording, trace, found, own
