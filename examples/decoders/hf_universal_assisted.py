"""Hugging Face universal assisted generation (UAG) as a user calls it: the drafter has its OWN
tokenizer, so transformers decodes the cloud's ids to text, re-tokenizes that text for the edge
(`skip_special_tokens=True`: chat markers and condition tokens are dropped), lets the edge draft
in its own vocabulary and maps the drafts back to the cloud's ids through text:
`cloud.generate(assistant_model=edge, tokenizer=..., assistant_tokenizer=...)`.

The edge's tokenizer is the one saved with its weights (`edge.name_or_path`). transformers
refuses `assistant_tokenizer` for two models of the same vocabulary width, so on the shipped demo
pair this is plain assisted generation; with an edge of its own vocabulary
(`python -m devtools.own_vocab DIR` from the repository root, then `record ... --edge-model DIR`) it is UAG.
`k` is ignored: transformers' schedule decides. Exact at greedy: the output equals the cloud's greedy
decode; the edge drafts without the audio condition tokens (a warning, not an error)."""
import torch
from transformers import AutoTokenizer

_OWN: dict = {}


def edge_tokenizer(edge, tokenizer):
    """The tokenizer saved with the edge's weights, else the shared one."""
    path = getattr(edge, "name_or_path", "") or ""
    if path not in _OWN:
        try:
            _OWN[path] = AutoTokenizer.from_pretrained(path) if path else tokenizer
        except (OSError, ValueError):
            _OWN[path] = tokenizer
    return _OWN[path]


@torch.no_grad()
def decode(edge, cloud, tokenizer, input_ids, k=4, max_new_tokens=128, stop_ids=(), **kw):
    stops = [int(s) for s in stop_ids]
    own = edge.config.vocab_size != cloud.config.vocab_size
    tokenizers = {"tokenizer": tokenizer, "assistant_tokenizer": edge_tokenizer(edge, tokenizer)}
    out = cloud.generate(input_ids, attention_mask=torch.ones_like(input_ids),
                         assistant_model=edge, **(tokenizers if own else {}),
                         do_sample=False, max_new_tokens=max_new_tokens,
                         eos_token_id=stops or None, pad_token_id=stops[0] if stops else None)
    return out[0, input_ids.shape[1]:].tolist()
