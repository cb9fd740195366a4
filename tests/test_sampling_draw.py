"""Sampling draws on the decoder's CPU Generator whatever device the models run on (a GPU
run of the app failed every sampled decode: "Expected a 'cuda' device type for generator but
found 'cpu'", scripts/gpu_app_check.py on an H200, 2026-11-28)."""
import pytest
import torch

from specdec_core.decoding import sampling


def test_draw_is_the_seeded_multinomial():
    w = torch.softmax(torch.randn(500, generator=torch.Generator().manual_seed(3)), -1)
    got = [sampling.draw(w, torch.Generator().manual_seed(s)) for s in range(20)]
    want = [int(torch.multinomial(w, 1, generator=torch.Generator().manual_seed(s))) for s in range(20)]
    assert got == want
    assert len(set(got)) > 1      # the seed reaches the draw


def _verify(device):
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 50, generator=g).to(device)
    q = torch.softmax(torch.randn(3, 50, generator=g), -1).to(device)
    return sampling.verify("sampling", [5, 6, 7], q, logits, 0.8, 1, torch.Generator().manual_seed(1))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: the GPU check runs it")
def test_sampling_verify_on_cuda_draws_what_the_cpu_draws():
    cpu, cuda = _verify("cpu"), _verify("cuda")
    assert (cuda.accepted, cuda.next_token) == (cpu.accepted, cpu.next_token)
