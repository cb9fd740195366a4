"""Cloud-only reference: the cloud model decoding alone with HF generate, greedy, same stops."""
from __future__ import annotations

import time

import torch
from transformers import MaxLengthCriteria, StoppingCriteria, StoppingCriteriaList

from specdec_core.decoding.stopping import StopChecker, build_stopper
from specdec_core.decoding.vocab import TokenClasses
from specdec_core.slots import pass_turn


def stopper_for(backend, prompt, cfg) -> StopChecker:
    """The fixed stop rule of `cfg` for one prompt on one backend."""
    return build_stopper(cfg, TokenClasses.for_tokenizer(backend.tokenizer), backend.stop_ids,
                         prompt.length)


@torch.inference_mode()
def cloud_only(backend, prompt, cfg, keep_logits: bool = False, repetition_penalty=None):
    """{"text", "token_ids", "wall_s"}; with keep_logits, (that dict, [n, V] float32 logits of
    each step's forward on the shared vocabulary) -- what the divergence verdict reads. With a
    repetition_penalty (record's declared target_repetition_penalty) generate applies it and the
    kept logits are the penalised ones."""
    checker = stopper_for(backend, prompt, cfg)
    dev = next(backend.cloud.parameters()).device
    t0 = time.perf_counter()
    extra = dict(output_logits=True, return_dict_in_generate=True) if keep_logits else {}
    if repetition_penalty is not None:
        extra.update(repetition_penalty=float(repetition_penalty),
                     **({"output_scores": True} if keep_logits else {}))
    out = backend.cloud.generate(
        input_ids=prompt.input_ids.to(dev), attention_mask=torch.ones_like(prompt.input_ids).to(dev),
        **prompt.prefill_kwargs, do_sample=False, max_new_tokens=cfg.max_new_tokens,
        eos_token_id=list(backend.stop_ids), pad_token_id=backend.stop_ids[0],
        stopping_criteria=StoppingCriteriaList([*id_criteria(checker), PassTurn()]),
        temperature=None, top_p=None, top_k=None, **extra)
    wall = time.perf_counter() - t0
    seq = out[0] if not hasattr(out, "sequences") else out.sequences[0]
    ids = seq[prompt.length:].tolist()
    text = backend.tokenizer.decode(ids, skip_special_tokens=True)
    res = {"text": text, "token_ids": ids, "wall_s": round(wall, 4)}
    if not keep_logits:
        return res
    v = getattr(backend, "shared_vocab", None)
    kept = out.scores if repetition_penalty is not None else out.logits
    logits = torch.stack([x[0] for x in kept]).float().cpu()
    return res, (logits[:, :v] if v else logits)


class PassTurn(StoppingCriteria):
    """Never stops: between two generate() steps, a server's decode slot goes to a run waiting
    in line (specdec_core/slots.pass_turn; nothing happens outside the app's slots)."""

    def __call__(self, input_ids, scores, **kwargs):
        pass_turn()
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


def id_criteria(checker: StopChecker) -> StoppingCriteriaList:
    """The checker's id-based criteria for generate(), whose own max_new_tokens covers length."""
    return StoppingCriteriaList([c for c in checker.criteria() if not isinstance(c, MaxLengthCriteria)])
