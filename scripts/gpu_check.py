"""GPU check for the omni backend: full-size random-init Qwen2.5-Omni 3B and 7B thinkers, run
with each decode engine side by side in one process (issue 44: eager and graphs; --tiny: eager
and static on a CPU with shrunken models, which checks the script end to end and measures nothing).

No weights are needed: the models have the published dimensions and random weights, so the
timings and memory are those of the real pair, while the text is noise. One sample clip goes
through the real Omni prompt, runner and decoder. Prints a markdown table and writes JSON:

    .venv/bin/python scripts/gpu_check.py [--engines eager,graphs] [--out FILE] [--peak-bw-tbs 3.35]
    .venv/bin/python scripts/gpu_check.py --tiny            # CPU: the script's own check

Per engine: edge and cloud step times (one token, and k+1 tokens as in a verify step), c =
edge/cloud, the cloud alone in a minimal greedy loop on our runner (tokens/s, and its share of the
card's bandwidth bound: text weights + KV cache bytes read per step / step time / peak
bandwidth), speculative decoding with draft == cloud (acceptance 1: the upper bound), with the
3B/7B pair and with a random-init head drafter on the 7B's features (random weights disagree:
acceptance near 0, the lower bound), and the acceptance at which the pair breaks even from the
measured c. Also: HF generate cloud-only (eager), build/prefill times, GPU memory, versions of the
card, driver, CUDA, torch and transformers.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Published thinker dimensions (config.json of Qwen/Qwen2.5-Omni-7B and Qwen/Qwen2.5-Omni-3B).
AUDIO = dict(d_model=1280, encoder_layers=32, encoder_attention_heads=20, encoder_ffn_dim=5120,
             num_mel_bins=128, max_source_positions=1500, n_window=100)
VISION = dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, in_channels=3,
              patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=112,
              fullatt_block_indexes=[7, 15, 23, 31], hidden_act="silu")
TEXT = {
    "7B": dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
               num_attention_heads=28, num_key_value_heads=4),
    # tie_word_embeddings=False: a separate 151936-row head (the conservative memory case).
    "3B": dict(vocab_size=151936, hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
               num_attention_heads=16, num_key_value_heads=2),
}
COMMON_TEXT = dict(max_position_embeddings=32768, rms_norm_eps=1e-6, tie_word_embeddings=False,
                   use_sliding_window=False, sliding_window=32768, hidden_act="silu",
                   rope_parameters={"rope_type": "default", "rope_theta": 1000000.0,
                                    "mrope_section": [16, 24, 24]})
# Real Qwen2.5 ids of the tokens the prompt and the stops use.
SPECIAL_IDS = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645,
               "<|AUDIO|>": 151646, "<|audio_bos|>": 151647, "<|audio_eos|>": 151648,
               "<|vision_bos|>": 151652, "<|vision_eos|>": 151653, "<|IMAGE|>": 151655,
               "<|VIDEO|>": 151656}
VOCAB_LEN = 151665


# --smoke: the same code path on a CPU with every dimension but the vocabulary shrunk.
SMOKE = dict(text=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                       num_attention_heads=4, num_key_value_heads=2,
                       rope_parameters={"rope_type": "default", "rope_theta": 1e6,
                                        "mrope_section": [2, 3, 3]}),
             audio=dict(d_model=32, encoder_layers=1, encoder_attention_heads=4, encoder_ffn_dim=64),
             vision=dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=4,
                         fullatt_block_indexes=[0]))


def thinker_config(size: str, smoke: bool = False):
    from transformers import Qwen2_5OmniThinkerConfig

    text, audio, vision = {**COMMON_TEXT, **TEXT[size]}, dict(AUDIO), dict(VISION)
    if smoke:
        text.update(SMOKE["text"], num_hidden_layers={"3B": 1, "7B": 2}[size])
        audio.update(SMOKE["audio"])
        vision.update(SMOKE["vision"])
    hidden = text["hidden_size"]
    # Audio/image/video token ids: the config defaults are the real ones; the vision frame ids
    # are not config fields in transformers 5.23 but are in the published config.json.
    return Qwen2_5OmniThinkerConfig(text_config=text, audio_config={**audio, "output_dim": hidden},
                                    vision_config={**vision, "out_hidden_size": hidden},
                                    vision_start_token_id=151652, vision_end_token_id=151653)


def real_id_tokenizer():
    """A char-level tokenizer whose special tokens sit at the real Qwen2.5 ids (151643...), so
    the random-init models see prompts of the real shape without a download."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from specdec_core.backends import omni_prompts

    chars = sorted(set(omni_prompts.SYSTEM_PROMPT + "".join(omni_prompts.INSTRUCTIONS.values())
                       + "\n说话人语速音调情绪的了，。"))
    tokens = ["<unk>", *chars]
    vocab = {t: i for i, t in enumerate(tokens)}
    by_id = {i: t for t, i in SPECIAL_IDS.items()}
    for i in range(len(tokens), VOCAB_LEN):
        vocab[by_id.get(i, f"<|filler_{i}|>")] = i
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    named = {"audio_token": "<|AUDIO|>", "audio_bos_token": "<|audio_bos|>",
             "audio_eos_token": "<|audio_eos|>", "image_token": "<|IMAGE|>",
             "video_token": "<|VIDEO|>", "vision_bos_token": "<|vision_bos|>",
             "vision_eos_token": "<|vision_eos|>"}
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", extra_special_tokens=named)
    fast.add_special_tokens({"additional_special_tokens": list(SPECIAL_IDS)},
                            replace_extra_special_tokens=False)
    return fast


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def build(size: str, device, dtype, smoke: bool = False):
    from transformers import Qwen2_5OmniThinkerForConditionalGeneration as Thinker

    torch.manual_seed({"3B": 3, "7B": 7}[size])
    t0 = time.perf_counter()
    with torch.device(device):   # random init straight on the GPU: no host copy
        model = Thinker._from_config(thinker_config(size, smoke), dtype=dtype)
    sync()
    return model.eval(), time.perf_counter() - t0


def _sync_time(fn, reps: int) -> float:
    """Median seconds of fn() over reps runs (after one warm-up)."""
    fn()
    times = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def engine_runner(backend, model, prompt, cfg, engine: str):
    """A runner of `model` on `engine` (eager | static | graphs), prefilled with `prompt`."""
    from specdec_core.decoding.engine import StaticPlan

    runner = backend.make_runner(model, "x")
    if engine != "eager":
        runner.static = StaticPlan(cfg, prompt.length, graphs=engine == "graphs")
    runner.prefill(prompt)
    return runner


def forward_times(backend, model, prompt, cfg, engine: str, reps: int = 20) -> dict:
    """Prefill time, then one-token and (k+1)-token step times from a fixed cache length (the
    static engines roll back by write position, eager crops)."""
    k = cfg.k
    runner = engine_runner(backend, model, prompt, cfg, engine)
    sync()
    t0 = time.perf_counter()
    runner.feed([prompt.input_ids[0, -1].item()])     # the prefill happens on the first feed
    sync()
    prefill_s = time.perf_counter() - t0
    base = runner.seen

    def step(n):
        def fn():
            runner.feed([100 + i for i in range(n)])
            runner.crop(base)
        return fn

    with torch.inference_mode():
        return {"prefill_s": prefill_s, "step1_s": _sync_time(step(1), reps),
                f"step{k + 1}_s": _sync_time(step(k + 1), reps)}


@torch.inference_mode()
def cloud_loop(backend, prompt, cfg, engine: str) -> dict:
    """The cloud alone, greedy, one forward per token on our runner (no stops: random weights),
    on `engine`; the second of two runs is timed."""
    out = {}
    for _ in range(2):
        runner = engine_runner(backend, backend.cloud, prompt, cfg, engine)
        nxt, n, ids = [int(prompt.input_ids[0, -1])], cfg.max_new_tokens, []
        runner.feed(nxt)                   # prefill + first step, not timed
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            nxt = [int(runner.feed(nxt)[-1].argmax())]
            ids.append(nxt[0])
        sync()
        wall = time.perf_counter() - t0
        out = {"tokens": n, "tokens_per_s": round(n / wall, 2), "wall_s": round(wall, 4),
               "cache_len": runner.seen, "token_ids": ids}
    return out


def run_sd(backend, prompt, cfg) -> dict:
    from specdec_core.decoding.decoder import SpeculativeDecoder

    SpeculativeDecoder(backend, cfg, trace=False).run(prompt)          # warm-up (graph capture)
    sync()
    tr = SpeculativeDecoder(backend, cfg, trace=False).run(prompt)
    m = tr.metrics
    return {"tokens": len(tr.token_ids), "tokens_per_s": m["tokens_per_s"], "wall_s": m["wall_s"],
            "acceptance_rate": m["acceptance_rate"], "mean_accepted_length": m["mean_accepted_length"],
            "cloud_calls": m["cloud_calls"], "engine": tr.info.get("engine"),
            "token_ids": [int(t) for t in tr.token_ids], "rounds": round_times(tr)}


def round_times(tr) -> dict:
    """Where an SD decode's wall time went: the first round (it holds both prefills: a runner
    prefills on its first feed), the later rounds (median), their sum, and the device time the
    CUDA events measured inside them (None on a CPU): round_s - device_s is the host's overhead."""
    rs = [r.round_s for r in tr.rounds]
    ds = [r.device_s for r in tr.rounds[1:] if r.device_s is not None]
    return {"n": len(rs), "first_s": round(rs[0], 4) if rs else None,
            "median_later_s": round(statistics.median(rs[1:]), 4) if len(rs) > 1 else None,
            "sum_s": round(sum(rs), 4),
            "median_later_device_s": round(statistics.median(ds), 4) if ds else None}


def agreement(by_engine: dict) -> dict:
    """Per decode (cloud loop, each SD run): does every engine emit the first engine's tokens?
    Greedy on the same weights, so any difference is the engine's numerics or a bug in it: in
    fp32 it must be none; in bf16 a late divergence between near-tied logits is kernel numerics."""
    names = list(by_engine)
    out = {}
    for run in ("cloud_loop", "sd_draft_eq_cloud", "sd_3b_7b", "sd_head"):
        ref = by_engine[names[0]][run]["token_ids"]
        for e in names[1:]:
            ids = by_engine[e][run]["token_ids"]
            first = next((i for i, (a, b) in enumerate(zip(ref, ids)) if a != b),
                         None if len(ref) == len(ids) else min(len(ref), len(ids)))
            out[f"{run}: {e} vs {names[0]}"] = {"identical": first is None, "first_divergence": first,
                                                "tokens": [len(ref), len(ids)]}
    return out


def run_cloud_only(backend, prompt, cfg) -> dict:
    from specdec_core.decoding.baseline import cloud_only

    cloud_only(backend, prompt, cfg)                                     # warm-up
    r = cloud_only(backend, prompt, cfg)
    n = len(r["token_ids"])
    return {"tokens": n, "tokens_per_s": round(n / r["wall_s"], 2), "wall_s": r["wall_s"]}


def predicted_speedup(alpha: float, k: int, c: float, verify: float = 1.0) -> float:
    """Leviathan et al.: expected tokens per round over the cost of a round (in cloud steps);
    `verify`: the (k+1)-token verify step over the one-token step (1 in the paper)."""
    tokens = (1 - alpha ** (k + 1)) / (1 - alpha) if alpha < 1 else k + 1
    return tokens / (k * c + verify)


def break_even(k: int, c: float, verify: float = 1.0) -> float | None:
    """The acceptance at which predicted_speedup = 1 (None: not even at acceptance 1)."""
    if predicted_speedup(1.0, k, c, verify) < 1:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if predicted_speedup(mid, k, c, verify) < 1 else (lo, mid)
    return round(hi, 4)


# Peak memory bandwidth (bytes/s) by the card's name (first match wins); --peak-bw-tbs overrides.
PEAK_BW = [("H200", 4.8e12), ("H100 NVL", 3.9e12), ("H100 PCIe", 2.0e12), ("H100", 3.35e12),
           ("A100-SXM4-80GB", 2.039e12), ("A100 80GB PCIe", 1.935e12), ("A100", 1.555e12),
           ("L40S", 0.864e12), ("L4", 0.3e12), ("A10G", 0.6e12), ("RTX 4090", 1.008e12)]


def peak_bandwidth(name: str, given_tbs: float | None) -> tuple[float | None, str]:
    if given_tbs:
        return given_tbs * 1e12, "--peak-bw-tbs"
    for key, bw in PEAK_BW:
        if key in name:
            return bw, f"table ({key})"
    return None, "unknown card: pass --peak-bw-tbs"


def bytes_per_step(model, cache_len: int) -> int:
    """Bytes a one-token decode step reads: the text model's weights and LM head (not the audio
    or vision towers) and the KV cache at `cache_len`."""
    w = sum(p.numel() * p.element_size() for n, p in model.named_parameters()
            if not n.startswith(("audio_tower", "visual")))
    t = model.config.get_text_config()
    head_dim = getattr(t, "head_dim", None) or t.hidden_size // t.num_attention_heads
    elem = next(model.parameters()).element_size()
    return w + 2 * t.num_hidden_layers * t.num_key_value_heads * head_dim * cache_len * elem


def versions(dev) -> dict:
    import subprocess

    import transformers

    out = {"torch": torch.__version__, "transformers": transformers.__version__,
           "cuda": torch.version.cuda, "card": None, "driver": None}
    if dev.type == "cuda":
        out["card"] = torch.cuda.get_device_name(dev)
        try:
            out["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            out["driver"] = None
    return out


def head_backend(pair, m7, dev, dtype):
    """The 3B/7B backend with a random-init EAGLE-style head on the 7B's features (drafter=head)."""
    import copy

    from devtools.train_head import head_config
    from specdec_core.demo.head import DraftHead

    torch.manual_seed(35)
    b = copy.copy(pair)
    b.head = DraftHead(head_config(m7.config.get_text_config())).to(dev, dtype).eval()
    return b


def engine_block(o: dict, engine: str, backends: dict, prompt, cfg, peak) -> dict:
    """Everything measured on one engine."""
    pair, same, headed = backends["pair"], backends["same"], backends["head"]
    cfg = cfg.replace(engine=engine)
    f3 = forward_times(pair, pair.edge, prompt, cfg, engine)
    f7 = forward_times(pair, pair.cloud, prompt, cfg, engine)
    k = cfg.k
    c, verify = f3["step1_s"] / f7["step1_s"], f7[f"step{k + 1}_s"] / f7["step1_s"]
    loop = cloud_loop(pair, prompt, cfg, engine)
    mid = prompt.length + loop["tokens"] // 2
    bpt = bytes_per_step(pair.cloud, mid)
    loop["bytes_per_step"] = bpt
    loop["bandwidth_share"] = None if peak is None else round(bpt * loop["tokens_per_s"] / peak, 4)
    return {"forward": {"edge_3B": f3, "cloud_7B": f7, "c": round(c, 4),
                        "verify_over_step": round(verify, 4)},
            "cloud_loop": loop,
            "sd_draft_eq_cloud": run_sd(same, prompt, cfg),
            "sd_3b_7b": run_sd(pair, prompt, cfg),
            "sd_head": run_sd(headed, prompt, cfg.replace(drafter="head")),
            "break_even_acceptance": {"leviathan": break_even(k, c), "measured_verify": break_even(k, c, verify)},
            "predicted_speedup": {str(a): round(predicted_speedup(a, k, c, verify), 3)
                                  for a in (0.5, 0.7, 0.8, 0.9)}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--audio", default=None, help="clip (default: the first sample_audio/*.wav)")
    ap.add_argument("--out", default=str(ROOT / "test-artifacts" / "gpu_check.json"))
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16",
                    help="GPU dtype (fp32 separates kernel numerics from decoder bugs)")
    ap.add_argument("--engines", default=None,
                    help="comma list of eager|static|graphs (default: eager,graphs; --tiny: eager,static)")
    ap.add_argument("--peak-bw-tbs", type=float, default=None,
                    help="the card's peak memory bandwidth in TB/s (default: a table by card name)")
    ap.add_argument("--tiny", "--smoke", dest="smoke", action="store_true",
                    help="CPU run with shrunken models: checks the script, measures nothing")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available() and not args.smoke:
        print("gpu_check: no CUDA GPU here; run it on a GPU machine (or --tiny)", file=sys.stderr)
        return 2
    smoke = args.smoke
    engines = (args.engines or ("eager,static" if smoke else "eager,graphs")).split(",")

    from specdec_core import DecodeConfig
    from specdec_core.audio.loading import load_audio
    from specdec_core.backends.omni import OmniBackend
    from specdec_core.backends.omni_loading import audio_only_processor, check_gpu_memory, memory_needed
    from transformers import WhisperFeatureExtractor

    torch.set_num_threads(1 if smoke else 4)
    dev = torch.device("cpu" if smoke else "cuda")
    dtype, GiB = (torch.float32 if smoke or args.dtype == "fp32" else torch.bfloat16), 1024 ** 3
    audio_path = args.audio or str(sorted((ROOT / "sample_audio").glob("*.wav"))[0])
    clip = load_audio(audio_path)
    configs = {"edge": thinker_config("3B", smoke), "cloud": thinker_config("7B", smoke)}
    need = memory_needed(configs, dtype)
    ver = versions(dev)
    peak, peak_src = peak_bandwidth(ver["card"] or "", args.peak_bw_tbs) if not smoke else (None, "cpu")
    out = {"device": "cpu (tiny: measures nothing)" if smoke else ver["card"], "versions": ver,
           "torch": torch.__version__, "transformers": ver["transformers"],
           "dtype": str(dtype).replace("torch.", ""), "engines": engines,
           "peak_bandwidth_bytes_s": peak, "peak_bandwidth_source": peak_src,
           "audio": audio_path, "audio_seconds": round(clip.duration, 2), "k": args.k,
           "max_new_tokens": args.max_new_tokens,
           "estimate_gib": {r: round(v / GiB, 2) for r, v in need.items()},
           "memory_check": None if smoke else check_gpu_memory(configs, dev, dtype)}

    allocated = (lambda: 0) if smoke else (lambda: torch.cuda.memory_allocated(dev))
    m7, t7 = build("7B", dev, dtype, smoke)
    mem7 = allocated()
    m3, t3 = build("3B", dev, dtype, smoke)
    mem_both = allocated()
    proc = audio_only_processor(WhisperFeatureExtractor(feature_size=128, sampling_rate=16000),
                                real_id_tokenizer())
    pair = OmniBackend(edge=m3, cloud=m7, processor=proc)
    backends = {"pair": pair, "same": OmniBackend(edge=m7, cloud=m7, processor=proc),
                "head": head_backend(pair, m7, dev, dtype)}
    prompt = pair.build_inputs(clip, "detailed")
    out.update(build_s={"3B": round(t3, 2), "7B": round(t7, 2)}, prompt_tokens=prompt.length,
               audio_tokens=prompt.info["audio_tokens"], edge_params=sum(p.numel() for p in m3.parameters()),
               cloud_params=sum(p.numel() for p in m7.parameters()), shared_vocab=pair.shared_vocab)

    cfg = DecodeConfig.from_dict(dict(k=args.k, verify="greedy", stop_at_first_sentence=False,
                                      min_new_tokens=0, max_new_tokens=args.max_new_tokens,
                                      cache_check_every=0, time_limit_s=0))
    if not smoke:
        torch.cuda.reset_peak_memory_stats(dev)
    out["cloud_only_hf_generate"] = run_cloud_only(pair, prompt, cfg)
    out["by_engine"] = {e: engine_block(out, e, backends, prompt, cfg, peak) for e in engines}
    if len(engines) > 1:
        a, b = (out["by_engine"][e]["cloud_loop"]["tokens_per_s"] for e in engines[:2])
        out[f"cloud_loop_{engines[1]}_over_{engines[0]}"] = round(b / a, 3)
        out["engine_agreement"] = agreement(out["by_engine"])
    peak_mem = 0 if smoke else torch.cuda.max_memory_allocated(dev)
    free, total = (0, 0) if smoke else torch.cuda.mem_get_info(dev)
    out["gpu_memory_gib"] = {"7B_weights": round(mem7 / GiB, 2), "both_weights": round(mem_both / GiB, 2),
                             "peak_during_runs": round(peak_mem / GiB, 2),
                             "free_after": round(free / GiB, 2), "total": round(total / GiB, 2)}

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2, ensure_ascii=False))
    print(json.dumps(out, indent=2, ensure_ascii=False))
    print(markdown(out, args.k))
    return 0


def _rounds(r: dict) -> str:
    ms = lambda x: "n/a" if x is None else f"{x * 1e3:.1f} ms"  # noqa: E731
    return (f"{ms(r['first_s'])} / {ms(r['median_later_s'])} ({ms(r['median_later_device_s'])}), "
            f"{r['n']} rounds")


def _pct(x) -> str:
    return "n/a" if x is None else f"{x:.0%}"


def markdown(o: dict, k: int) -> str:
    g, v = o["gpu_memory_gib"], o["versions"]
    rows = [
        ("device", f"{o['device']} ({o['dtype']}); driver {v['driver']}, CUDA {v['cuda']}, "
                   f"torch {v['torch']}, transformers {v['transformers']}"),
        ("clip", f"{o['audio']} ({o['audio_seconds']} s, {o['audio_tokens']} audio tokens, "
                 f"prompt {o['prompt_tokens']} tokens)"),
        ("build 3B / 7B (random init)", f"{o['build_s']['3B']} s / {o['build_s']['7B']} s"),
        ("GPU memory: weights 7B / both / peak", f"{g['7B_weights']} / {g['both_weights']} / {g['peak_during_runs']} GiB"),
        ("cloud-only HF generate (eager)", f"{o['cloud_only_hf_generate']['tokens_per_s']} tok/s"),
    ]
    for e, b in o["by_engine"].items():
        f, lp = b["forward"], b["cloud_loop"]
        be = b["break_even_acceptance"]
        rows += [
            (f"[{e}] 1-token step 3B / 7B", f"{f['edge_3B']['step1_s'] * 1e3:.2f} ms / {f['cloud_7B']['step1_s'] * 1e3:.2f} ms"),
            (f"[{e}] {k + 1}-token verify 7B", f"{f['cloud_7B'][f'step{k + 1}_s'] * 1e3:.2f} ms"),
            (f"[{e}] c = edge/cloud step", f"{f['c']}"),
            (f"[{e}] cloud-only loop", f"{lp['tokens_per_s']} tok/s, {_pct(lp['bandwidth_share'])} of the bandwidth bound"),
            (f"[{e}] SD draft == cloud (acceptance 1)", f"{b['sd_draft_eq_cloud']['tokens_per_s']} tok/s"),
            (f"[{e}] SD draft == cloud: first round (prefills) / later rounds, median (device)",
             _rounds(b['sd_draft_eq_cloud']['rounds'])),
            (f"[{e}] SD 3B/7B (random weights)", f"{b['sd_3b_7b']['tokens_per_s']} tok/s, acceptance {b['sd_3b_7b']['acceptance_rate']}"),
            (f"[{e}] SD head drafter (random head)", f"{b['sd_head']['tokens_per_s']} tok/s, acceptance {b['sd_head']['acceptance_rate']}"),
            (f"[{e}] break-even acceptance (k={k})", f"{be['leviathan']} (verify = step), {be['measured_verify']} (measured verify)"),
        ]
    for key in o:
        if key.startswith("cloud_loop_") and "_over_" in key:
            rows.append((key.replace("_", " "), f"{o[key]}×"))
    for key, a in o.get("engine_agreement", {}).items():
        rows.append((f"same tokens, {key}", "identical" if a["identical"] else
                     f"differs from token {a['first_divergence']} (lengths {a['tokens']})"))
    return "\n".join(["| quantity | value |", "|---|---|"] + [f"| {a} | {b} |" for a, b in rows])


if __name__ == "__main__":
    sys.exit(main())
