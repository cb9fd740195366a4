"""The pair checks: one small function each, `check(edge, cloud) -> finding | None` (None: the
pair passes it), registered with scope "pair" (a new check is its function and its `@check`
line). Every finding comes from the two folders' own files, never from the backend's name."""
from __future__ import annotations

from specdec_core.analysis.divergence import common_prefix
from specdec_core.findings import finding, register
from specdec_core.pairs import versions
from specdec_core.pairs.sides import Side
from specdec_core.recorder.checks.registry import check

# the pair codes, registered where they are found (as the audit's)
register("tokenizer_mismatch", "error", "the pair's tokenizers map text to different ids",
         "tokenizer vocabularies or encodings differ", source="pair")
register("stop_ids_mismatch", "error", "the pair stops on different ids", "EOS / im_end ids differ",
         source="pair")
register("chat_template_mismatch", "warning", "the pair's chat templates render differently",
         "rendered prompts differ", source="pair")
register("rope_mismatch", "error", "the pair's rotary position settings differ", "rope config differs "
         "(error when the multimodal rope sections differ)", source="pair", severities=("error", "warning"))
register("audio_frontend_mismatch", "error", "the pair's audio front ends differ",
         "feature extractor settings differ", source="pair")
register("cache_not_croppable", "error", "the cache class cannot be rolled back", "no crop on the cache",
         source="pair")
register("dtype_mismatch", "warning", "the pair runs in different dtypes", "model dtypes differ",
         source="pair")
register("transformers_untested", "warning", "the transformers version is outside the tested range",
         "transformers.__version__", source="pair")
register("check_failed", "info", "a pair check raised instead of answering (never blocks a load)",
         "an exception inside a pair check", source="pair")

PROBES = ("说话人语速较快，音调偏高，情绪开心。", "0123456789 3.14 2026-11-24 100%",
          "The speaker sounds calm and slow.", "中文 mixed with English 42 次")
FE_FIELDS = {"sampling_rate": "sampling rate", "feature_size": "mel bins (feature_size)",
             "hop_length": "hop length", "chunk_length": "chunk length (s)", "n_fft": "n_fft"}
STATIC_CACHES = ("static", "offloaded_static", "sliding_window", "hybrid", "mamba", "quantized")
RECURRENT = ("mamba", "mamba2", "falcon_mamba", "rwkv", "recurrent_gemma", "jamba", "xlstm")


def _short(x, n=60) -> str:
    s = repr(x)
    return s if len(s) <= n else s[: n - 1] + "…"


@check("tokenizer_mismatch", scope="pair", order=1)
def tokenizer_mismatch(edge: Side, cloud: Side):
    """Both models read the cloud's prompt ids and the cloud verifies the edge's ids: every id
    must mean the same text to both. Probes (Chinese, digits, English, special tokens) are
    encoded by each tokenizer and decoded back; a stride over the vocabulary is compared too."""
    te, tc = edge.tokenizer, cloud.tokenizer
    specials = sorted({t for s in (te, tc) for t in getattr(s, "all_special_tokens", []) or []})[:40]
    probes = list(PROBES) + ["".join(specials[:20]) + "你好", "".join(specials[20:]) + "1"]
    differ = lambda detail: finding("tokenizer_mismatch", "The tokenizers disagree", detail,  # noqa: E731
                                    fix="use a draft built on the cloud's tokenizer (same vocabulary and special tokens)")
    for t in specials:
        a, b = te.convert_tokens_to_ids(t), tc.convert_tokens_to_ids(t)
        if a != b:
            return differ(f"special token {t} is id {b} for the cloud and {a} for the edge")
    for text in probes:
        ia = te(text, add_special_tokens=False).input_ids
        ib = tc(text, add_special_tokens=False).input_ids
        if ia != ib:
            at = common_prefix(ia, ib)
            return differ(f"{_short(text, 40)} encodes differently from token {at}: cloud "
                          f"{_short(ib[at:at + 4])}, edge {_short(ia[at:at + 4])}")
        da = te.decode(ia, skip_special_tokens=False)
        db = tc.decode(ib, skip_special_tokens=False)
        if da != db:
            return differ(f"the same ids decode to {_short(db, 40)} (cloud) and {_short(da, 40)} (edge)")
    n = min(len(te), len(tc))
    step = max(1, n // 4000)
    ids = list(range(0, n, step))
    ta, tb = te.convert_ids_to_tokens(ids), tc.convert_ids_to_tokens(ids)
    diff = next((i for i, a, b in zip(ids, ta, tb) if a != b), None)
    if diff is not None or len(te) != len(tc):
        return differ(f"id {diff} is {_short(tb[ids.index(diff)])} for the cloud and "
                      f"{_short(ta[ids.index(diff)])} for the edge" if diff is not None else
                      f"the cloud has {len(tc)} tokens, the edge {len(te)}")
    return None


def _stops(side: Side) -> set[int]:
    eos = side.generation.get("eos_token_id")
    out = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if side.tokenizer.eos_token_id is not None:
        out.add(side.tokenizer.eos_token_id)
    return out


@check("stop_ids_mismatch", scope="pair", order=2)
def stop_ids_mismatch(edge: Side, cloud: Side):
    """The answer ends on the cloud's stop ids; the edge must stop on the same ones."""
    e, c = _stops(edge), _stops(cloud)
    if not edge.generation or not cloud.generation:   # one side without generation_config.json
        e = {edge.tokenizer.eos_token_id} - {None}
        c = {cloud.tokenizer.eos_token_id} - {None}
    if e == c:
        return None
    names = lambda side, ids: ", ".join(f"{i} {side.tokenizer.convert_ids_to_tokens(int(i))}" for i in sorted(ids))
    return finding("stop_ids_mismatch", "Edge and cloud stop on different tokens",
                   f"cloud stops on {names(cloud, c) or 'nothing'}; edge on {names(edge, e) or 'nothing'}",
                   fix="give the edge the cloud's eos_token_id (generation_config.json and tokenizer)")


@check("chat_template_mismatch", scope="pair", order=3)
def chat_template_mismatch(edge: Side, cloud: Side):
    """Both models prefill the cloud's prompt; an edge tuned on another chat frame drafts badly."""
    a, b = edge.chat_template, cloud.chat_template
    if not a or not b or a == b:
        return None
    conv = [{"role": "system", "content": "你是助手。"}, {"role": "user", "content": "说话人情绪？"}]
    try:
        ra = edge.tokenizer.apply_chat_template(conv, chat_template=a, tokenize=False, add_generation_prompt=True)
        rb = cloud.tokenizer.apply_chat_template(conv, chat_template=b, tokenize=False, add_generation_prompt=True)
    except Exception as e:  # noqa: BLE001 - a template that does not render is a difference too
        ra, rb = f"(error: {e})", "(rendered)"
    if ra == rb:
        return None
    at = common_prefix(ra, rb)
    return finding("chat_template_mismatch", "The chat templates differ",
                   f"the same conversation renders differently from character {at}: cloud "
                   f"{_short(rb[at:at + 30])}, edge {_short(ra[at:at + 30])}; both models read "
                   "the cloud's prompt, so the edge sees a frame it was not tuned on",
                   fix="use an edge from the cloud's model family (same chat template)")


@check("vocab_widths", scope="pair", order=4)
def vocab_widths(edge: Side, cloud: Side):
    """Output heads wider than the tokenizer (padding rows, as in every Qwen checkpoint) are
    fine: SpecScope compares the first min(width) rows. Narrower than the tokenizer is not."""
    we, wc, n = edge.head_width, cloud.head_width, len(cloud.tokenizer)
    if not we or not wc or (we == wc == n):
        return None
    detail = f"head widths: edge {we}, cloud {wc}; tokenizer {n} tokens"
    if min(we, wc) < n:
        return finding("vocab_widths", "A head is narrower than the tokenizer",
                       detail + f"; tokens from id {min(we, wc)} on can never be drafted or verified",
                       fix="use models whose heads cover the whole tokenizer", severity="warning")
    return finding("vocab_widths", "Heads wider than the tokenizer",
                   detail + ("" if we == wc else "; the heads differ in width") +
                   f"; rows past {n} are padding, decoding compares the first {min(we, wc)}",
                   fix="nothing to do")


def _rope(cfg: dict) -> dict:
    p = dict(cfg.get("rope_scaling") or {})
    p.update(cfg.get("rope_parameters") or {})
    return {"type": p.get("rope_type") or p.get("type") or "default",
            "theta": p.get("rope_theta", cfg.get("rope_theta")),
            "mrope_section": p.get("mrope_section")}


@check("rope_mismatch", scope="pair", order=5)
def rope_mismatch(edge: Side, cloud: Side):
    """One position sequence feeds both models (3-row mrope positions on the Omni pair)."""
    e, c = _rope(edge.config), _rope(cloud.config)
    if e == c:
        return None
    mrope = e["mrope_section"] != c["mrope_section"]
    return finding("rope_mismatch", "Rotary position settings differ",
                   f"cloud {c}, edge {e}" + ("; multimodal rope sections differ: the shared "
                                            "positions would be wrong for one model" if mrope else ""),
                   fix="use an edge from the cloud's model family (same rope settings)", severity="error" if mrope else "warning")


@check("audio_frontend_mismatch", scope="pair", order=6)
def audio_frontend_mismatch(edge: Side, cloud: Side):
    """The cloud's processor computes the features both audio encoders read."""
    fe_e, fe_c = edge.feature_extractor or {}, cloud.feature_extractor or {}
    if not (fe_e or fe_c or edge.audio_config or cloud.audio_config):
        return None
    fix = "use an edge whose audio front end matches the cloud's (same feature extractor settings)"
    if bool(edge.audio_config) != bool(cloud.audio_config):
        side = "edge" if edge.audio_config else "cloud"
        return finding("audio_frontend_mismatch", "Only one model hears audio",
                       f"only the {side} has an audio encoder", fix=fix)
    diffs = [f"{FE_FIELDS[k]}: cloud {fe_c.get(k)}, edge {fe_e.get(k)}" for k in FE_FIELDS
             if fe_c and fe_e and fe_c.get(k) != fe_e.get(k)]
    mels = fe_c.get("feature_size")
    for side in (edge, cloud):
        want = (side.audio_config or {}).get("num_mel_bins")
        if mels and want and want != mels:
            diffs.append(f"the {side.role} audio encoder takes {want} mel bins, the cloud's "
                         f"processor makes {mels}")
    if not diffs:
        return None
    return finding("audio_frontend_mismatch", "The audio front ends differ",
                   "; ".join(diffs), fix=fix)


def _not_croppable(side: Side) -> str | None:
    cfg, kind = side.config, side.model_type or side.config.get("model_type", "")
    if kind in RECURRENT or cfg.get("model_type") in RECURRENT:
        return f"{kind} keeps a recurrent state"
    layers = cfg.get("layer_types")
    if layers and any("sliding" in str(t) for t in layers):
        return f"sliding-window attention (window {cfg.get('sliding_window')})"
    if not layers and cfg.get("sliding_window") and cfg.get("use_sliding_window", True):
        return f"sliding-window attention (window {cfg.get('sliding_window')})"
    impl = side.generation.get("cache_implementation")
    if impl in STATIC_CACHES:
        return f"generation_config cache_implementation={impl!r}"
    return None


@check("cache_not_croppable", scope="pair", order=7)
def cache_not_croppable(edge: Side, cloud: Side):
    """Rejected drafts roll the KV cache back; sliding-window, static and recurrent caches
    cannot be cropped."""
    why = [f"{s.role}: {r}" for s in (edge, cloud) if (r := _not_croppable(s))]
    if not why:
        return None
    return finding("cache_not_croppable", "A cache cannot be rolled back",
                   "; ".join(why) + " — rejected drafts could not be undone",
                   fix="use full-attention models with a dynamic cache (drop cache_implementation)")


@check("dtype_mismatch", scope="pair", order=8)
def dtype_mismatch(edge: Side, cloud: Side):
    if not edge.dtype or not cloud.dtype or edge.dtype == cloud.dtype:
        return None
    return finding("dtype_mismatch", "The checkpoints use different dtypes",
                   f"cloud {cloud.dtype}, edge {edge.dtype}; both load at the run's --dtype, so "
                   "one of them runs at a precision it was not saved in",
                   fix="compare at one dtype (--dtype) or use checkpoints saved alike")


@check("transformers_untested", scope="pair", order=9)
def transformers_untested(edge: Side, cloud: Side):
    version = versions.transformers_version()
    if versions.is_tested(version) is not False:
        return None
    return finding("transformers_untested", "Untested transformers version",
                   f"transformers {version} is outside the tested range "
                   f"transformers{versions.tested_range()}",
                   fix=f"pip install 'transformers{versions.tested_range()}' (or make test to check this one)")


# what a passed check found, in words (a passed check is not named by the failure it rules out)
PASSED = {"tokenizer_mismatch": "same tokenizer", "stop_ids_mismatch": "same stop ids",
          "chat_template_mismatch": "same chat template", "vocab_widths": "heads cover the vocabulary",
          "rope_mismatch": "same positions (rope)", "audio_frontend_mismatch": "same audio front end",
          "cache_not_croppable": "caches can be cropped", "dtype_mismatch": "same dtype",
          "transformers_untested": "transformers in the tested range"}


def passed_words(codes) -> str:
    return ", ".join(PASSED.get(c, c) for c in codes or ())
