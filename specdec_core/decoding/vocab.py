"""Token classes over a vocabulary: which ids are CJK content, punctuation, sentence ends.

Gates and stops work on ids, never on decoded text (seed 000 A: string stops break on BPE), so
every id is decoded once, here. A BPE token counts as punctuation when it merely *contains* a
punctuation character ("好。" is a sentence end), which a `tokenizer.encode("。")` lookup would miss."""
from __future__ import annotations

import weakref

import numpy as np
import torch

CJK_LO, CJK_HI = "\u4e00", "\u9fff"
PUNCT_CHARS = "，。、：:；！？,.!?;"
COMMA_CHARS = "，、：:,"  # the half-width comma too, else a gated model switches to it
PERIOD_CHARS = "。."     # also the sentence ends (the first-sentence stop)

# What an id outside the tokenizer's vocabulary reads as (model heads are often padded wider).
_FILL = {"first_cjk": -1, "last_cjk": -1}

_cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def is_cjk(ch: str) -> bool:
    return CJK_LO <= ch <= CJK_HI


class TokenClasses:
    """Per-id facts about a vocabulary, as tensors indexed by token id.

    Bool tensors [V]: `cjk` (text has a CJK content char U+4E00-U+9FFF), `punct` (has any of
    ，。、：:；！？,.!?;), `comma_like` (has ，、：: or ,), `period_like` (has 。 or .), `sentence_end`
    (has 。 or .), `content` (= cjk and not punct: what gates treat as a content character).
    Int tensors [V]: `cjk_chars` (number of CJK chars), `cjk_tail` (CJK chars after the token's
    last punctuation char; = cjk_chars when it has none), `first_cjk` / `last_cjk` (code point
    of the first / last non-space char when that char is CJK, else -1).
    """

    def __init__(self, texts: list[str]):
        self.texts = list(texts)
        for name, col in _classify(self.texts).items():
            setattr(self, name, torch.from_numpy(col))
        self._tables: dict = {}

    def __len__(self) -> int:
        return len(self.texts)

    @classmethod
    def for_tokenizer(cls, tokenizer) -> "TokenClasses":
        """Classes for a HF tokenizer (or a raw `tokenizers.Tokenizer`), built once per object
        and rebuilt only if tokens were added since."""
        n = _vocab_len(tokenizer)
        try:
            hit = _cache.get(tokenizer)
        except TypeError:  # not weak-referenceable / hashable: build without caching
            return cls(decode_each(tokenizer, n))
        if hit is not None and len(hit) == n:
            return hit
        classes = cls(decode_each(tokenizer, n))
        _cache[tokenizer] = classes
        return classes

    # -- id lookups the gates use -------------------------------------------------------------
    def table(self, name: str, size: int, device) -> torch.Tensor:
        """Table `name` resized to `size` entries on `device` (ids past the vocabulary read as
        False / 0 / -1), cached: gates call this every step."""
        key = (name, size, str(device))
        if key not in self._tables:
            base = getattr(self, name)
            t = torch.full((size,), _FILL.get(name, 0), dtype=base.dtype)
            t[: len(base)] = base[:size]
            self._tables[key] = t.to(device)
        return self._tables[key]

    def lookup(self, name: str, ids: torch.Tensor) -> torch.Tensor:
        """Table `name` at `ids` (any shape); ids outside the vocabulary read as the fill."""
        n = len(self.texts)
        t = self.table(name, n + 1, ids.device)  # entry n is the out-of-vocab fill
        safe = torch.where((ids >= 0) & (ids < n), ids, torch.full_like(ids, n))
        return t[safe]

    def ids(self, name: str) -> list[int]:
        """Ids where the bool table `name` is true (e.g. `ids("sentence_end")`)."""
        return getattr(self, name).nonzero().flatten().tolist()


def _vocab_len(tokenizer) -> int:
    if hasattr(tokenizer, "get_vocab_size"):  # raw tokenizers.Tokenizer
        return tokenizer.get_vocab_size(with_added_tokens=True)
    return len(tokenizer)


def decode_each(tokenizer, n: int | None = None) -> list[str]:
    """The text of every id decoded on its own (byte-level pieces of a multi-byte char come
    out as U+FFFD and so belong to no class). One batched call, run in Rust when possible."""
    n = _vocab_len(tokenizer) if n is None else n
    singles = [[i] for i in range(n)]
    if hasattr(tokenizer, "decode_batch"):  # raw tokenizers.Tokenizer
        return tokenizer.decode_batch(singles, skip_special_tokens=False)
    if hasattr(tokenizer, "batch_decode"):
        return tokenizer.batch_decode(singles, skip_special_tokens=False,
                                      clean_up_tokenization_spaces=False)
    return [tokenizer.decode([i]) for i in range(n)]


def _codes(chars: str) -> np.ndarray:
    return np.array([ord(c) for c in chars], dtype=np.int64)


# Every Unicode whitespace char is at or below U+3000.
_SPACE = _codes("".join(chr(c) for c in range(0x3001) if chr(c).isspace()))


def _classify(texts: list[str]) -> dict[str, np.ndarray]:
    """All tables at once, vectorised over the concatenated text (151k Qwen ids in well under a
    second; a per-token Python loop takes several times longer). Per token i, its characters
    are cp[lo[i]:hi[i]]; per-token counts are differences of running sums over characters."""
    n = len(texts)
    lens = np.fromiter((len(s) for s in texts), dtype=np.int64, count=n)
    hi = np.cumsum(lens)
    lo = hi - lens
    # A trailing space keeps every index below valid even when all texts are empty.
    cp = np.frombuffer(("".join(texts) + " ").encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    idx = np.arange(len(cp))
    nonempty = lens > 0
    last = np.maximum(hi - 1, 0)

    def count(flags: np.ndarray) -> np.ndarray:
        run = np.concatenate([[0], np.cumsum(flags)])
        return run[hi] - run[lo]

    def cjk_code(pos: np.ndarray, ok: np.ndarray) -> np.ndarray:
        c = cp[np.where(ok, pos, 0)]
        return np.where(ok & (c >= ord(CJK_LO)) & (c <= ord(CJK_HI)), c, -1)

    cjk_f = (cp >= ord(CJK_LO)) & (cp <= ord(CJK_HI))
    punct_f = np.isin(cp, _codes(PUNCT_CHARS))
    run_cjk = np.concatenate([[0], np.cumsum(cjk_f)])
    n_cjk = run_cjk[hi] - run_cjk[lo]
    has_punct = count(punct_f) > 0
    period = count(np.isin(cp, _codes(PERIOD_CHARS))) > 0

    # CJK chars after the token's last punctuation char.
    lp = np.maximum.accumulate(np.where(punct_f, idx, -1))[last]
    in_tok = nonempty & (lp >= lo)
    tail = np.where(in_tok, run_cjk[hi] - run_cjk[np.where(in_tok, lp + 1, 0)], n_cjk)

    # First / last non-space char of each token.
    solid = ~np.isin(cp, _SPACE)
    first = np.minimum.accumulate(np.where(solid, idx, len(cp))[::-1])[::-1][lo]
    final = np.maximum.accumulate(np.where(solid, idx, -1))[last]

    return {
        "cjk": n_cjk > 0,
        "punct": has_punct,
        "comma_like": count(np.isin(cp, _codes(COMMA_CHARS))) > 0,
        "period_like": period,
        "sentence_end": period,
        "content": (n_cjk > 0) & ~has_punct,
        "cjk_chars": n_cjk,
        "cjk_tail": tail.astype(np.int64),
        "first_cjk": cjk_code(first, nonempty & (first < hi)),
        "last_cjk": cjk_code(final, nonempty & (final >= lo)),
    }
