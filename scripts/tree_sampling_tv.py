"""Ground truth for the tree sampling checks (issue 42): the first emitted token of a tree round,
sampled N times by EAGLE's `evaluate_posterior` on one fixed tree, against the cloud's p at T.

For each clip: the cloud's greedy text up to its most uncertain step (largest entropy at T in
the first 30 tokens), the edge's EAGLE-2 tree after it (as
examples/decoders/tree_eagle_sampling.py drafts it), one verify forward, then N draws of the
round's first emitted token (the accepted child at the root, or the token drawn from sample_p)
with the exact rule and with the twin that leaves the residual unchanged between siblings.
Prints TV(empirical, p) per rule and the noise floor (mean TV of N draws from p itself).

    PYTHONPATH=. python scripts/tree_sampling_tv.py --n 2000 sample_audio/*_01.wav
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "decoders"))

import tree_eagle_correct as tree  # noqa: E402
import tree_eagle_sampling as exact  # noqa: E402
import tree_eagle_sampling_no_residual as twin  # noqa: E402
from transformers import DynamicCache  # noqa: E402


def first_round(backend, src, T: float, k: int):
    from specdec_core.api import prepare
    from specdec_core.decoding.config import DecodeConfig

    prompt = prepare(backend, src, DecodeConfig())
    edge, cloud = backend.edge, backend.cloud
    seq = prompt.input_ids[0].tolist()
    ec, cc = DynamicCache(), DynamicCache()
    with torch.no_grad():       # the prefix: the cloud's greedy text up to its most uncertain step
        g = cloud(input_ids=torch.tensor([seq + greedy(cloud, seq, 30)])).logits[0, len(seq) - 1:-1].float()
        ent = -(torch.softmax(g / T, -1) * torch.log_softmax(g / T, -1)).sum(-1)
        seq = seq + greedy(cloud, seq, int(ent.argmax()) + 1)
        cloud(input_ids=torch.tensor([seq[:-1]]), past_key_values=cc, use_cache=True)
        nodes = tree.draft_tree(edge, ec, seq, len(seq) - 1, k)
        order = tree.select(nodes)
        logp, row = tree.verify(cloud, cc, seq[-1], nodes, order)
    ret = torch.tensor(exact.retrieve_indices(nodes, order, row), dtype=torch.long)
    ids = torch.tensor([seq[-1]] + [nodes[i]["tok"] for i in order] + [-1])
    return logp[ret], ids[ret], torch.softmax(logp[0].float() / T, -1)


def greedy(cloud, seq, n: int) -> list:
    out = cloud.generate(torch.tensor([seq]), max_new_tokens=n, do_sample=False, min_new_tokens=n)
    return out[0, len(seq):].tolist()


def draws(posterior, logits, cands, T: float, n: int, seed: int) -> torch.Tensor:
    random.seed(seed)
    gen = torch.Generator().manual_seed(seed)
    proc = exact.prepare_logits_processor(temperature=T)
    out = torch.zeros(logits.shape[-1])
    for _ in range(n):
        best, acc, sample_p = posterior(logits, cands, proc)
        tok = int(cands[int(best), 1]) if int(acc) >= 1 else int(torch.multinomial(sample_p.float(), 1, generator=gen))
        out[tok] += 1
    return out / n


def tv(a: torch.Tensor, b: torch.Tensor) -> float:
    return 0.5 * float((a - b).abs().sum())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("audio", nargs="+")
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--k", type=int, default=4)
    args = ap.parse_args()
    torch.set_num_threads(1)
    from specdec_core.api import load_backend

    b = load_backend("demo")
    gen = torch.Generator().manual_seed(0)
    print("clip | siblings at the root (p) | TV exact | TV twin | noise floor (mean, 95%)")
    for i, src in enumerate(args.audio):
        logits, cands, p = first_round(b, src, args.temperature, args.k)
        kids = sorted({int(x) for x in cands[:, 1].tolist() if x >= 0})
        floor = torch.tensor([tv(torch.bincount(torch.multinomial(p, args.n, replacement=True, generator=gen),
                                                minlength=p.numel()).float() / args.n, p) for _ in range(200)])
        e = tv(draws(exact.evaluate_posterior, logits, cands, args.temperature, args.n, 1000 + i), p)
        w = tv(draws(twin.evaluate_posterior, logits, cands, args.temperature, args.n, 2000 + i), p)
        sib = ", ".join(f"{t}:{float(p[t]):.3f}" for t in kids)
        print(f"{Path(src).name} | {sib} | {e:.4f} | {w:.4f} | {float(floor.mean()):.4f}, "
              f"{float(floor.quantile(0.95)):.4f}")


if __name__ == "__main__":
    main()
