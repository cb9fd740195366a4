"""Draft-side gates: exact behaviour on crafted logits, agreement with a plain-Python reference
step by step inside a real `model.generate` (tiny random Qwen2), and the symptom each gate
removes."""
from __future__ import annotations

import math
import random

import pytest
import torch
from transformers import (LogitsProcessor, LogitsProcessorList, PreTrainedTokenizerFast,
                          Qwen2Config, Qwen2ForCausalLM)

from specdec_core.decoding.config import DecodeConfig
from specdec_core.errors import ConfigError
from specdec_core.decoding.gates import (AdjacentRepeatBan, CjkNoRepeatNGram, CjkRepetitionPenalty,
                                PunctuationGate, build_gates)
from tiny import word_level
from specdec_core.decoding.vocab import PUNCT_CHARS, TokenClasses, is_cjk

torch.set_num_threads(1)

CHARS = "说话人时语速较慢音调平稳量适中色停顿好天气很情绪紧张度高低" + "，。、：:；！？,.!?;"


def char_tokenizer(chars: str = CHARS) -> PreTrainedTokenizerFast:
    return word_level(["<pad>", "<eos>"], chars, unk_token="<pad>", pad_token="<pad>", eos_token="<eos>")


TOK = char_tokenizer()
CLS = TokenClasses.for_tokenizer(TOK)
V = len(CLS)
INF = float("-inf")


def ids(text: str) -> list[int]:
    return TOK.encode(text)


def row(text: str) -> torch.Tensor:
    return torch.tensor([ids(text)])


def flat_scores(v: int = V, batch: int = 1, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, v, generator=g) * 3


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal up to float32 rounding (torch divides by a scalar via its reciprocal); -inf only
    where the other has -inf."""
    return bool(torch.isclose(a, b, rtol=1e-6, atol=0).all())


def changed(before: torch.Tensor, after: torch.Tensor) -> set[int]:
    return set((before != after).nonzero()[:, -1].tolist())


# --- plain-Python references (texts in, banned ids / new scores out) -------------------------

def _text(classes, i):
    return classes.texts[i] if 0 <= i < len(classes.texts) else ""


def ref_chars_since_punct(classes, hist: list[int]) -> int:
    n = 0
    for i in reversed(hist):
        s = _text(classes, i)
        cut = max((s.rfind(p) for p in PUNCT_CHARS), default=-1)
        if cut >= 0:
            return n + sum(map(is_cjk, s[cut + 1:]))
        n += sum(map(is_cjk, s))
    return n


def ref_content(classes, i) -> bool:
    s = _text(classes, i)
    return any(map(is_cjk, s)) and not any(p in s for p in PUNCT_CHARS)


def ref_is(classes, i, chars) -> bool:
    return any(c in _text(classes, i) for c in chars)


def ref_punct_gate(classes, hist, scores, min_chars, which):
    chars = "，、：:," if which == "comma" else "。."
    out = scores.clone()
    if ref_chars_since_punct(classes, hist) < min_chars:
        for v in range(len(out)):
            if any(c in _text(classes, v) for c in chars):
                out[v] = INF
    return out


def ref_adjacent(classes, hist, scores):
    out = scores.clone()
    if not hist:
        return out
    last = hist[-1]
    if ref_content(classes, last) and last < len(out):
        out[last] = INF
    tail = _text(classes, last).strip()
    if tail and is_cjk(tail[-1]):
        for v in range(len(out)):
            s = _text(classes, v).strip()
            if s and s[0] == tail[-1]:
                out[v] = INF
    return out


def ref_ngram(classes, hist, scores, n):
    c = [i for i in hist if ref_content(classes, i)]
    out = scores.clone()
    if len(c) < n:
        return out
    prefix = tuple(c[len(c) - n + 1:])
    for i in range(len(c) - n + 1):
        if tuple(c[i:i + n - 1]) == prefix and c[i + n - 1] < len(out):
            out[c[i + n - 1]] = INF
    return out


def ref_penalty(classes, hist, scores, penalty):
    out = scores.clone()
    for v in set(hist):
        if v < len(out) and ref_content(classes, v):
            x = out[v].item()
            out[v] = x / penalty if x > 0 else x * penalty
    return out


# --- crafted logits --------------------------------------------------------------------------

def test_comma_gate_counts_cjk_chars_since_last_punct():
    gate = PunctuationGate(CLS, 4, "comma")
    s = flat_scores()
    comma_ids = set(CLS.ids("comma_like"))
    assert {TOK.convert_tokens_to_ids(c) for c in "，、：:,"} == comma_ids
    out = gate(row("说话人"), s)                        # 3 chars < 4: commas banned
    assert changed(s, out) == comma_ids
    assert torch.isneginf(out[0, sorted(comma_ids)]).all()
    assert torch.equal(gate(row("说话人说"), s), s)     # 4 chars: untouched
    assert changed(s, gate(row("说话人说，话人"), s)) == comma_ids  # reset by the comma
    assert changed(s, gate(row("说话人说。话人"), s)) == comma_ids  # any punctuation resets
    assert torch.equal(gate(row("说，话人说话"), s), s)
    assert changed(s, gate(row(""), s)) == comma_ids   # nothing generated yet


def test_period_gate_bans_only_period_like():
    gate = PunctuationGate(CLS, 8, "period")
    s = flat_scores()
    out = gate(row("说话人，慢"), s)
    assert changed(s, out) == {TOK.convert_tokens_to_ids("。"), TOK.convert_tokens_to_ids(".")}
    assert changed(s, gate(row("说话人，慢慢说话时语速"), s))  # 7 since the comma
    assert torch.equal(gate(row("说话人，慢慢说话时语速较"), s), s)


def test_gate_start_skips_the_prompt():
    prompt, gen = "说话人说话时语速", "慢"
    s = flat_scores()
    h = row(prompt + gen)
    assert torch.equal(PunctuationGate(CLS, 4, start=0)(h, s), s)
    assert changed(s, PunctuationGate(CLS, 4, start=len(prompt))(h, s)) == set(CLS.ids("comma_like"))
    pen = CjkRepetitionPenalty(CLS, 2.0, start=len(prompt))
    assert changed(s, pen(h, s)) == {ids("慢")[0]}


def test_gates_are_batched_per_row():
    h = torch.tensor([ids("说话人说"), ids("说话，人")])
    s = flat_scores(batch=2)
    out = PunctuationGate(CLS, 4)(h, s)
    assert torch.equal(out[0], s[0])
    assert changed(s[1:], out[1:]) == set(CLS.ids("comma_like"))
    out = CjkNoRepeatNGram(CLS, 2)(torch.tensor([ids("音色中音色"), ids("音，色，音")]), s)
    assert changed(s[:1], out[:1]) == {ids("中")[0]}
    assert changed(s[1:], out[1:]) == {ids("色")[0]}


def test_adjacent_repeat_ban():
    gate = AdjacentRepeatBan(CLS)
    s = flat_scores()
    out = gate(row("说话慢"), s)
    assert changed(s, out) == {ids("慢")[0]}
    assert out[0, ids("慢")[0]] == INF
    assert torch.equal(gate(row("说话，"), s), s)          # punctuation may repeat (comma gate's job)
    assert torch.equal(gate(row(""), s), s)


def test_no_repeat_ngram_over_punctuation_stripped_history():
    s = flat_scores()
    two = CjkNoRepeatNGram(CLS, 2)
    assert changed(s, two(row("音色，音"), s)) == {ids("色")[0]}
    assert changed(s, two(row("音色，中，音"), s)) == {ids("色")[0]}
    assert torch.equal(two(row("音色中"), s), s)
    three = CjkNoRepeatNGram(CLS, 3)
    assert changed(s, three(row("音色中，音色"), s)) == {ids("中")[0]}
    assert changed(s, three(row("音色，中，音，色"), s)) == {ids("中")[0]}
    assert torch.equal(three(row("音色中，色音"), s), s)


def test_repetition_penalty_cjk_only_hf_rule():
    gate = CjkRepetitionPenalty(CLS, 1.25)
    s = torch.zeros(1, V)
    m, y, comma, h = (ids(c)[0] for c in "慢音，好")
    s[0, m], s[0, y], s[0, comma], s[0, h] = 2.0, -1.0, 3.0, 4.0
    out = gate(row("慢音，慢，"), s)
    assert out[0, m].item() == pytest.approx(2.0 / 1.25)
    assert out[0, y].item() == pytest.approx(-1.25)
    assert out[0, comma].item() == 3.0                 # punctuation never penalised
    assert out[0, h].item() == 4.0                     # not in the history
    assert changed(s, out) == {m, y}


@pytest.mark.parametrize("seed", range(30))
def test_vectorised_gates_match_reference_on_random_histories(seed):
    rnd = random.Random(seed)
    batch = 3
    hist = [[rnd.randrange(V) for _ in range(rnd.randint(0, 40))] for _ in range(batch)]
    width = max(map(len, hist))
    # left-pad with a CJK id so that rows have one length; start hides the padding per row
    pad = ids("说")[0]
    for h in hist:
        start = width - len(h)
        inp = torch.tensor([[pad] * start + h])
        s = flat_scores(seed=seed)
        for gate, ref in [
            (PunctuationGate(CLS, 3, "comma", start), lambda x: ref_punct_gate(CLS, h, x, 3, "comma")),
            (PunctuationGate(CLS, 6, "period", start), lambda x: ref_punct_gate(CLS, h, x, 6, "period")),
            (AdjacentRepeatBan(CLS, start), lambda x: ref_adjacent(CLS, h, x)),
            (CjkNoRepeatNGram(CLS, 2, start), lambda x: ref_ngram(CLS, h, x, 2)),
            (CjkNoRepeatNGram(CLS, 3, start), lambda x: ref_ngram(CLS, h, x, 3)),
            (CjkRepetitionPenalty(CLS, 1.3, start), lambda x: ref_penalty(CLS, h, x, 1.3)),
        ]:
            assert same(gate(inp, s)[0], ref(s[0])), (type(gate).__name__, h)


# --- BPE-like vocabularies: multi-char tokens and merged punctuation ----------------------------

BPE = TokenClasses(["<pad>", "说话", "话", "话人", "人话", "好。", "。天气", "，", "很", " 慢", "ok."])


def bid(t):
    return BPE.texts.index(t)


def test_bpe_classes_contain_rule():
    assert BPE.ids("sentence_end") == [bid("好。"), bid("。天气"), bid("ok.")]
    assert BPE.ids("period_like") == BPE.ids("sentence_end")
    assert BPE.ids("comma_like") == [bid("，")]
    assert BPE.ids("content") == [bid(t) for t in ["说话", "话", "话人", "人话", "很", " 慢"]]
    assert BPE.cjk_chars[bid("说话")] == 2 and BPE.cjk_tail[bid("。天气")] == 2
    assert BPE.cjk_tail[bid("好。")] == 0 and BPE.first_cjk[bid(" 慢")] == ord("慢")


def test_bpe_punctuation_gate_counts_characters():
    s = flat_scores(v=len(BPE))
    gate = PunctuationGate(BPE, 4)
    hist = lambda *ts: torch.tensor([[bid(t) for t in ts]])
    assert changed(s, gate(hist("说话", "很"), s)) == {bid("，")}       # 3 chars
    assert torch.equal(gate(hist("说话", "话人"), s), s)                 # 4 chars in 2 tokens
    assert changed(s, gate(hist("说话", "话人", "。天气"), s)) == {bid("，")}  # 2 after the 。
    assert torch.equal(gate(hist("。天气", "说话"), s), s)               # 2 + 2


def test_bpe_adjacent_ban_is_by_character():
    s = flat_scores(v=len(BPE))
    out = AdjacentRepeatBan(BPE)(torch.tensor([[bid("说话")]]), s)
    # "说话" itself, and every token starting with 话 ("话", "话人"); not "人话"
    assert changed(s, out) == {bid("说话"), bid("话"), bid("话人")}


def test_wider_head_and_out_of_vocab_ids():
    s = flat_scores(v=V + 5)
    h = torch.tensor([ids("说话人") + [V + 2, V + 3]])
    for gate in build_gates(DecodeConfig(comma_gate=4, period_gate=8, ban_adjacent_repeat=True,
                                         no_repeat_ngram=2, repetition_penalty=1.2), TOK):
        out = gate(h, s)
        assert out.shape == s.shape
        assert torch.equal(out[0, V:], s[0, V:])         # ids the tokenizer lacks are never touched


def test_ban_never_leaves_a_row_without_candidates():
    tiny = TokenClasses(["，", "。"])
    s = torch.tensor([[1.0, 2.0]])
    out = build_gates({"comma_gate": 3, "period_gate": 3}, tiny)(torch.tensor([[0]]), s)
    assert torch.isfinite(out).any()
    assert not torch.isnan(torch.softmax(out, -1)).any()


# --- build_gates ------------------------------------------------------------------------------

def test_build_gates_reads_knobs():
    assert len(build_gates(DecodeConfig(), TOK)) == 0
    assert len(build_gates({"repetition_penalty": 1.0, "comma_gate": 0, "no_repeat_ngram": 0}, TOK)) == 0
    gates = build_gates(DecodeConfig(comma_gate=4, period_gate=8, ban_adjacent_repeat=True,
                                     no_repeat_ngram=3, repetition_penalty=1.2), TOK, start=7)
    kinds = [type(g).__name__ for g in gates]
    assert kinds == ["CjkRepetitionPenalty", "AdjacentRepeatBan", "CjkNoRepeatNGram",
                     "PunctuationGate", "PunctuationGate"]
    assert [g.which for g in gates[3:]] == ["comma", "period"]
    assert [g.min_chars for g in gates[3:]] == [4, 8]
    assert gates[2].n == 3 and gates[0].penalty == 1.2
    assert all(g.start == 7 for g in gates)
    assert all(g.classes is CLS for g in gates)        # cached per tokenizer


def test_bad_gate_arguments():
    with pytest.raises(ConfigError, match="which"):
        PunctuationGate(CLS, 3, "semicolon")
    with pytest.raises(ConfigError, match="repetition_penalty"):
        CjkRepetitionPenalty(CLS, 0.0)
    with pytest.raises(ConfigError, match="no_repeat_ngram"):
        CjkNoRepeatNGram(CLS, 0)


def test_classes_cached_per_tokenizer_and_rebuilt_after_added_tokens():
    tok = char_tokenizer("说话，。")
    a = TokenClasses.for_tokenizer(tok)
    assert TokenClasses.for_tokenizer(tok) is a
    tok.add_tokens(["情"])
    b = TokenClasses.for_tokenizer(tok)
    assert b is not a and len(b) == len(a) + 1 and bool(b.content[-1])


# --- inside model.generate ----------------------------------------------------------------------

class Favor(LogitsProcessor):
    """Test-only: push chosen ids up (provoke the symptom a gate fights) and keep eos/pad out."""

    def __init__(self, bias: dict[int, float]):
        self.bias = bias

    def __call__(self, input_ids, scores):
        scores = scores.clone()
        for i, b in self.bias.items():
            scores[:, i] += b
        scores[:, :2] = INF
        return scores


class Record(LogitsProcessor):
    def __init__(self):
        self.calls = []

    def __call__(self, input_ids, scores):
        self.calls.append((input_ids.clone(), scores.clone()))
        return scores


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=V + 3, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      pad_token_id=0, eos_token_id=1, bos_token_id=None, tie_word_embeddings=False)
    return Qwen2ForCausalLM(cfg).eval()


PROMPT = torch.tensor([ids("说话人语速较慢，"), ids("音调平稳，音量适中")[:8]])


def generate(model, processors, n=40, sample=True, seed=1):
    torch.manual_seed(seed)
    knobs = dict(do_sample=True, top_k=0, top_p=1.0, temperature=1.0) if sample else dict(do_sample=False)
    out = model.generate(PROMPT, attention_mask=torch.ones_like(PROMPT), max_new_tokens=n,
                         min_new_tokens=n, logits_processor=LogitsProcessorList(processors),
                         pad_token_id=0, **knobs)
    return out[:, PROMPT.shape[1]:]


START = PROMPT.shape[1]
GATE_CASES = {
    "comma": (lambda: PunctuationGate(CLS, 3, "comma", START),
              lambda h, s: ref_punct_gate(CLS, h, s, 3, "comma")),
    "period": (lambda: PunctuationGate(CLS, 6, "period", START),
               lambda h, s: ref_punct_gate(CLS, h, s, 6, "period")),
    "adjacent": (lambda: AdjacentRepeatBan(CLS, START), lambda h, s: ref_adjacent(CLS, h, s)),
    "ngram2": (lambda: CjkNoRepeatNGram(CLS, 2, START), lambda h, s: ref_ngram(CLS, h, s, 2)),
    "ngram3": (lambda: CjkNoRepeatNGram(CLS, 3, START), lambda h, s: ref_ngram(CLS, h, s, 3)),
    "penalty": (lambda: CjkRepetitionPenalty(CLS, 1.5, START), lambda h, s: ref_penalty(CLS, h, s, 1.5)),
}


@pytest.mark.parametrize("name", list(GATE_CASES))
def test_gate_inside_generate_matches_reference_every_step(model, name):
    make, ref = GATE_CASES[name]
    before, after = Record(), Record()
    bias = {ids("，")[0]: 2.0, ids("。")[0]: 1.0, ids("慢")[0]: 3.5, ids("音")[0]: 3.0}
    out = generate(model, [Favor(bias), before, make(), after])
    assert out.shape == (2, 40)
    assert len(before.calls) == 40
    touched = 0
    for (inp, s0), (_, s1) in zip(before.calls, after.calls):
        for b in range(inp.shape[0]):
            expect = ref(inp[b, START:].tolist(), s0[b])
            assert same(s1[b], expect)
            touched += int(not torch.equal(s1[b], s0[b]))
    assert touched > 0, f"{name} never acted in 80 steps: the test would not catch a no-op"


def commas_too_early(classes, gen_ids, min_chars):
    """How many comma-like tokens came with fewer than min_chars CJK chars since the last
    punctuation (the symptom the comma gate removes)."""
    bad = 0
    for i, t in enumerate(gen_ids):
        if ref_is(classes, t, "，、：:,") and ref_chars_since_punct(classes, gen_ids[:i]) < min_chars:
            bad += 1
    return bad


def test_comma_gate_removes_the_flood_in_generate(model):
    flood = {ids("，")[0]: 6.0}
    plain = generate(model, [Favor(flood)], sample=False)
    gated = generate(model, [Favor(flood), PunctuationGate(CLS, 4, "comma", START)], sample=False)
    for b in range(2):
        assert commas_too_early(CLS, plain[b].tolist(), 4) > 5
        assert commas_too_early(CLS, gated[b].tolist(), 4) == 0
        # commas still come, just not too early
        assert sum(ref_is(CLS, t, "，、：:,") for t in gated[b].tolist()) >= 3


def test_adjacent_and_ngram_bans_in_generate(model):
    loop = {ids("慢")[0]: 6.0, ids("音")[0]: 5.0}
    plain = generate(model, [Favor(loop)], sample=False)
    assert any(a == b for a, b in zip(plain[0].tolist(), plain[0, 1:].tolist()))
    adj = generate(model, [Favor(loop), AdjacentRepeatBan(CLS, START)], sample=False)
    for r in adj.tolist():
        assert not any(a == b and ref_content(CLS, a) for a, b in zip(r, r[1:]))
    ng = generate(model, [Favor(loop), CjkNoRepeatNGram(CLS, 2, START)], sample=False)
    for r in ng.tolist():
        c = [t for t in r if ref_content(CLS, t)]
        grams = list(zip(c, c[1:]))
        assert len(grams) == len(set(grams)) > 10


def test_build_gates_list_in_generate_batched(model):
    cfg = DecodeConfig(comma_gate=3, period_gate=6, ban_adjacent_repeat=True, no_repeat_ngram=2,
                       repetition_penalty=1.2)
    gates = build_gates(cfg, TOK, start=START)
    out = generate(model, [Favor({ids("，")[0]: 3.0}), *gates], n=30)
    for r in out.tolist():
        assert commas_too_early(CLS, r, 3) == 0
        c = [t for t in r if ref_content(CLS, t)]
        assert len(set(zip(c, c[1:]))) == len(c) - 1
        assert not any(a == b and ref_content(CLS, a) for a, b in zip(r, r[1:]))
    assert not math.isnan(float(out.float().sum()))


# --- vocabulary tables ----------------------------------------------------------------------------

def ref_tables(s: str) -> dict:
    punct_at = [i for i, ch in enumerate(s) if ch in PUNCT_CHARS]
    st = s.strip()
    return {
        "cjk": any(map(is_cjk, s)), "punct": bool(punct_at),
        "comma_like": any(c in s for c in "，、：:,"), "period_like": any(c in s for c in "。."),
        "sentence_end": any(c in s for c in "。."),
        "content": any(map(is_cjk, s)) and not punct_at,
        "cjk_chars": sum(map(is_cjk, s)),
        "cjk_tail": sum(map(is_cjk, s[punct_at[-1] + 1:] if punct_at else s)),
        "first_cjk": ord(st[0]) if st and is_cjk(st[0]) else -1,
        "last_cjk": ord(st[-1]) if st and is_cjk(st[-1]) else -1,
    }


def test_vectorised_tables_match_a_per_token_reference():
    rnd = random.Random(0)
    alphabet = "说话人好。，、：:,.!?;；！？ \n\u3000ab\ufffd😀\u4e00\u9fff\u3400"
    texts = ["", " ", "。", "好"] + ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 6)))
                                    for _ in range(3000)] + [""]
    cls = TokenClasses(texts)
    for name in ref_tables("").keys():
        got = getattr(cls, name).tolist()
        want = [ref_tables(s)[name] for s in texts]
        assert got == want, name
    assert len(TokenClasses([])) == 0 and TokenClasses([""]).cjk.tolist() == [False]
