"""Cloud-only reference: the cloud model decoding alone with HF generate, greedy, same stops."""
from __future__ import annotations

import time

import torch
from transformers import LogitsProcessorList, MaxLengthCriteria, StoppingCriteria, StoppingCriteriaList

from specdec_core.decoding.stopping import StopChecker, build_stopper
from specdec_core.decoding.vocab import TokenClasses
from specdec_core.slots import pass_turn


def stopper_for(backend, prompt, cfg) -> StopChecker:
    """The fixed stop rule of `cfg` for one prompt on one backend."""
    return build_stopper(cfg, TokenClasses.for_tokenizer(backend.tokenizer), backend.stop_ids,
                         prompt.length)


def cloud_only(backend, prompt, cfg, keep_logits: bool = False, repetition_penalty=None):
    """{"text", "token_ids", "wall_s"}; with keep_logits, (that dict, [n, V] float32 logits on the
    shared vocabulary, penalised when a repetition_penalty is given) for the divergence verdict."""
    checker = stopper_for(backend, prompt, cfg)
    t0 = time.perf_counter()
    ids, logits = greedy(backend.cloud, prompt.input_ids, cfg.max_new_tokens, list(backend.stop_ids),
                         [*id_criteria(checker), PassTurn()], keep_logits, repetition_penalty,
                         **prompt.prefill_kwargs)
    res = {"text": backend.tokenizer.decode(ids, skip_special_tokens=True), "token_ids": ids,
           "wall_s": round(time.perf_counter() - t0, 4)}
    if not keep_logits:
        return res
    v = getattr(backend, "shared_vocab", None)
    return res, (logits[:, :v] if v else logits)


@torch.inference_mode()
def greedy(model, input_ids, n: int, stop_ids=None, criteria=(), keep_logits: bool = False,
           repetition_penalty=None, vocab: int | None = None, **kw):
    """The one cloud-only greedy decoder (HF generate): (new ids, [n, V] float32 logits or None).
    stop_ids None: exactly n tokens, EOS included (the audit's reference); `vocab`: ids past it are
    never chosen; `kw`: generate's other inputs."""
    dev = next(model.parameters()).device
    x = torch.as_tensor(input_ids).view(1, -1).to(dev)
    extra = dict(output_logits=True, return_dict_in_generate=True) if keep_logits else {}
    if repetition_penalty is not None:
        extra.update(repetition_penalty=float(repetition_penalty),
                     **({"output_scores": True} if keep_logits else {}))
    if vocab is not None:
        extra["logits_processor"] = LogitsProcessorList([lambda ids, s: s.index_fill(-1, torch.arange(
            vocab, s.shape[-1], device=s.device), float("-inf"))])
    out = model.generate(
        input_ids=x, attention_mask=torch.ones_like(x), **kw, do_sample=False, max_new_tokens=n,
        eos_token_id=stop_ids, pad_token_id=stop_ids[0] if stop_ids else None,
        stopping_criteria=StoppingCriteriaList(criteria), temperature=None, top_p=None, top_k=None, **extra)
    seq = out[0] if not hasattr(out, "sequences") else out.sequences[0]
    if not keep_logits:
        return seq[x.shape[1]:].tolist(), None
    kept = out.scores if repetition_penalty is not None else out.logits
    return seq[x.shape[1]:].tolist(), torch.stack([s[0] for s in kept]).float().cpu()


class PassTurn(StoppingCriteria):
    """Never stops: between two generate() steps, a server's decode slot goes to a run waiting
    in line (specdec_core/slots.pass_turn; nothing happens outside the app's slots)."""

    def __call__(self, input_ids, scores, **kwargs):
        pass_turn()
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


def id_criteria(checker: StopChecker) -> StoppingCriteriaList:
    """The checker's id-based criteria for generate(), whose own max_new_tokens covers length."""
    return StoppingCriteriaList([c for c in checker.criteria() if not isinstance(c, MaxLengthCriteria)])
