"""Training of the demo draft head (scripts/train_head.py): EAGLE's recipe, scaled down.

Input at position t: the cloud's feature f_t and the embedding of token t+1; target: the cloud's
feature f_{t+1} (smooth L1) and token t+2 through the cloud's frozen LM head (cross entropy).
Uniform noise on the input features (EAGLE) makes the head tolerate its own features when it
drafts several tokens in a row.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, Qwen2Config

from devtools.demo_tokenizer import build_tokenizer
from devtools.train_demo import MODELS_DIR, SEED, Recipe, batches
from specdec_core.demo.head import DraftHead

RECIPE = Recipe(hidden=128, layers=1, heads=4, kv_heads=1, ffn=384, steps=300, batch=16,
                lr=3e-3, warmup=30)
NOISE = 0.2   # EAGLE's feature noise, relative to the features' RMS


def head_config(cloud_config) -> Qwen2Config:
    """The head's one layer, shaped like the cloud's (saved as head/config.json)."""
    c = cloud_config
    return Qwen2Config(
        vocab_size=8, hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
        num_hidden_layers=1, num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads, max_position_embeddings=c.max_position_embeddings,
        rope_theta=10000.0, rms_norm_eps=c.rms_norm_eps, use_cache=True)


def head_loss(head, cloud, ids, labels, gen):
    with torch.no_grad():
        out = cloud(input_ids=ids, output_hidden_states=True)
        feats = out.hidden_states[-1]
    f_in = feats[:, :-1]
    f_in = f_in + (torch.rand(f_in.shape, generator=gen) - 0.5) * 2 * NOISE * f_in.std()
    emb = cloud.get_input_embeddings()(ids[:, 1:])
    pred = head(f_in, emb)
    valid = (labels[:, 1:] != -100).unsqueeze(-1)
    reg = F.smooth_l1_loss(pred * valid, feats[:, 1:] * valid)
    logits = cloud.get_output_embeddings()(pred[:, :-1])
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels[:, 2:].reshape(-1),
                         ignore_index=-100)
    return ce + 10 * reg, ce


def train(cloud, tok, steps: int, log=print) -> tuple[DraftHead, dict]:
    torch.manual_seed(SEED + 35)
    gen = torch.Generator().manual_seed(SEED + 36)
    for p in cloud.parameters():
        p.requires_grad_(False)
    head = DraftHead(head_config(cloud.config))
    opt = torch.optim.AdamW(head.parameters(), lr=RECIPE.lr, betas=(0.9, 0.98), weight_decay=0.01)
    data = batches(tok, RECIPE, SEED + 13)
    t0, ces = time.perf_counter(), []
    for step in range(steps):
        warm = min(1.0, (step + 1) / RECIPE.warmup)
        for g in opt.param_groups:
            g["lr"] = RECIPE.lr * warm * (0.1 + 0.45 * (1 + math.cos(math.pi * step / steps)))
        ids, labels = next(data)
        loss, ce = head_loss(head, cloud, ids, labels, gen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
        opt.step()
        ces.append(ce.item())
        if step % 50 == 0 or step == steps - 1:
            log(f"[head] step {step:4d} ce {ce.item():.3f} ({time.perf_counter() - t0:.0f}s)")
    head.eval()
    tail = ces[-20:]
    return head, {"params": sum(p.numel() for p in head.parameters()),
                  "recipe": {**asdict(RECIPE), "steps": steps, "noise": NOISE},
                  "seconds": round(time.perf_counter() - t0, 1),
                  "final_ce": round(sum(tail) / len(tail), 4)}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description="train the demo draft head")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=RECIPE.steps)
    ap.add_argument("--out", default=str(MODELS_DIR))
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    out = Path(args.out)
    cloud = AutoModelForCausalLM.from_pretrained(str(out / "cloud")).eval()
    head, entry = train(cloud, build_tokenizer(), args.steps)
    head.save(out / "head")
    report_path = out / "train_report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {"models": {}}
    report["models"]["head"] = entry
    report_path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps(entry, indent=2))
    return entry
