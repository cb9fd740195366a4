"""Train the shipped demo pair (edge + cloud) on the synthetic corpus, on CPU, deterministically.

    python scripts/train_demo.py [--out specdec_core/demo/models] [--threads 2]

The cloud model must write well-formed, correctly conditioned sentences; the edge model is made
clearly weaker (smaller, fewer steps) so that greedy acceptance is partial and the edge alone
sometimes loops, which is what the debugger is for.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from devtools import demo_corpus
from devtools.demo_tokenizer import build_tokenizer, save_tokenizer
from specdec_core.backends.demo import MODELS_DIR
from specdec_core.demo import prompt
SEED = 20240
MAX_LEN = 176          # longest first turn is ~140 tokens; second turns are cut here
BUCKET = 16            # batches per length-sorted pool (less padding, same data)


@dataclass
class Recipe:
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    steps: int
    batch: int
    lr: float
    warmup: int = 30


# Depth, not width, sets the cost of a one-token forward of models this small on a CPU (the
# per-layer framework overhead dominates), so the cloud is deep and the edge has ONE layer: an
# edge forward costs about 0.2 of a cloud forward (docs/benchmarks.md measures c), which is what
# lets speculative decoding pay off on the demo pair. One layer also keeps the edge clearly
# weaker (it cannot compose the cue -> emotion rule as reliably), so acceptance stays partial.
RECIPES = {
    "cloud": Recipe(hidden=128, layers=10, heads=4, kv_heads=1, ffn=384, steps=1400, batch=32,
                    lr=2e-3, warmup=60),
    "edge": Recipe(hidden=128, layers=1, heads=4, kv_heads=1, ffn=384, steps=700, batch=32,
                   lr=3e-3),
}


def make_config(r: Recipe, tok) -> Qwen2Config:
    return Qwen2Config(
        vocab_size=len(tok), hidden_size=r.hidden, intermediate_size=r.ffn,
        num_hidden_layers=r.layers, num_attention_heads=r.heads, num_key_value_heads=r.kv_heads,
        max_position_embeddings=512, tie_word_embeddings=True, rope_theta=10000.0,
        bos_token_id=tok.convert_tokens_to_ids(prompt.IM_START),
        eos_token_id=[tok.convert_tokens_to_ids(prompt.IM_END), tok.eos_token_id],
        pad_token_id=tok.pad_token_id, use_cache=True,
    )


def batches(tok, recipe: Recipe, seed: int):
    """Yield (input_ids, labels) batches; documents come from a seeded grammar, so two runs see
    the same data in the same order."""
    rng = random.Random(seed)
    pad = tok.pad_token_id
    while True:
        pool = [tok(demo_corpus.document(rng)[0])["input_ids"][:MAX_LEN]
                for _ in range(recipe.batch * BUCKET)]
        pool.sort(key=len)
        chunks = [pool[i:i + recipe.batch] for i in range(0, len(pool), recipe.batch)]
        rng.shuffle(chunks)
        for chunk in chunks:
            width = max(map(len, chunk))
            ids = torch.full((len(chunk), width), pad, dtype=torch.long)
            labels = torch.full((len(chunk), width), -100, dtype=torch.long)
            for i, seq in enumerate(chunk):
                ids[i, :len(seq)] = torch.tensor(seq)
                labels[i, :len(seq)] = torch.tensor(seq)
            yield ids, labels


def train_one(role: str, recipe: Recipe, tok, out_dir: Path, log=None) -> dict:
    torch.manual_seed(SEED + (0 if role == "cloud" else 1))
    model = Qwen2ForCausalLM(make_config(recipe, tok))
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=recipe.lr, betas=(0.9, 0.98),
                            weight_decay=0.01)

    def lr_at(step):  # linear warmup, cosine to 10%
        if step < recipe.warmup:
            return recipe.lr * (step + 1) / recipe.warmup
        t = (step - recipe.warmup) / max(1, recipe.steps - recipe.warmup)
        return recipe.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))

    data = batches(tok, recipe, SEED + 7 if role == "cloud" else SEED + 11)
    log = log or (lambda msg: print(msg, flush=True))
    losses, t0 = [], time.perf_counter()
    for step in range(recipe.steps):
        ids, labels = next(data)
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        # Right padding + causal attention: pads never influence real tokens, so no mask needed.
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if step % 50 == 0 or step == recipe.steps - 1:
            log(f"[{role}] step {step:4d} loss {loss.item():.3f} "
                f"({time.perf_counter() - t0:.0f}s)")
    seconds = time.perf_counter() - t0

    model.eval()
    model.generation_config.eos_token_id = model.config.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out_dir), safe_serialization=True)
    save_tokenizer(out_dir)
    tail = losses[-20:]
    return {"params": sum(p.numel() for p in model.parameters()), "recipe": asdict(recipe),
            "seconds": round(seconds, 1), "final_loss": round(sum(tail) / len(tail), 4)}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=MODELS_DIR)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", choices=sorted(RECIPES), help="train one model (for tuning)")
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    tok = build_tokenizer()
    report_path = args.out / "train_report.json"
    report = {"seed": SEED, "threads": args.threads, "torch": torch.__version__, "models": {}}
    if args.only and report_path.exists():  # retraining one model keeps the other's entry
        report = json.loads(report_path.read_text())
    t0 = time.perf_counter()
    for role in RECIPES if args.only is None else [args.only]:
        report["models"][role] = train_one(role, RECIPES[role], tok, args.out / role)
    report["total_seconds"] = round(sum(m["seconds"] for m in report["models"].values()), 1)
    report["wall_seconds_this_run"] = round(time.perf_counter() - t0, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    report_path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
