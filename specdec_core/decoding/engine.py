"""The `engine` knob (issue 44): how a runner's forwards are executed.

eager   transformers' DynamicCache, every forward the shape it needs.
static  one preallocated KV cache per model (StaticCache through compat.py); every decode step
        padded to one of a few fixed widths and handed an explicit [width, cache length] mask;
        rollback moves the write position (slots past it are masked and overwritten). Runs anywhere.
graphs  static, each fixed-width step captured once as a CUDA graph and replayed. CUDA only; the
        prompt's prefill (Omni: the audio) stays eager.
A runner with `static` set (a `StaticPlan`) calls `plan.step(...)` instead of the model."""
from __future__ import annotations

import os

import torch

from specdec_core.compat import set_write_position
from specdec_core.errors import ConfigError


def check_engine(engine: str, device) -> None:
    """graphs needs a CUDA device: a one-line refusal anywhere else."""
    if engine == "graphs" and torch.device(device).type != "cuda":
        raise ConfigError(f"engine=graphs captures CUDA graphs and needs a CUDA device; the models "
                          f"are on {torch.device(device).type} (use engine=static there)")


def step_widths(cfg) -> tuple[int, ...]:
    """The fixed step widths: 1 (a draft step), 2 (a draft step with its catch-up), k+1 (a chain
    verify), the widest tree verify, and powers of two between (few shapes, little padding)."""
    widest = cfg.k + 2 if cfg.draft_tree == "chain" else max(cfg.k, cfg.tree_nodes) + 2
    out, w = {1, 2, cfg.k + 1, widest}, 4
    while w < widest:
        out.add(w)
        w *= 2
    return tuple(sorted(out))


class StaticPlan:
    """One runner's static cache length, step widths and (graphs) captured steps."""

    def __init__(self, cfg, prompt_len: int, graphs: bool = False):
        self.widths = step_widths(cfg)
        # every write ends before prompt + max_new_tokens + a padded step past the committed end
        self.kv_len = prompt_len + cfg.max_new_tokens + 2 * self.widths[-1] + 2
        self.graphs = graphs
        self.pad = True          # False under a recorder: each step at its own width
        self.captured: dict = {}
        self.pad_id = 0

    def width(self, n: int) -> int:
        """The fixed width a step of n tokens runs at (n itself past the widest: a prefill)."""
        if not self.pad:
            return n
        return next((w for w in self.widths if w >= n), n)

    def mask(self, past: int, n: int, w: int, vis: torch.Tensor | None, device) -> torch.Tensor:
        """[w, kv_len] bool: row j sees slots <= past + j (or a tree's `vis` [n, past + n]);
        padding rows see themselves and the real rows (their outputs are dropped)."""
        if past + w > self.kv_len:
            raise RuntimeError(f"engine=static: a step writes slots {past}..{past + w - 1} past "
                               f"the cache's {self.kv_len}")
        kv = torch.arange(self.kv_len, device=device)
        m = kv[None, :] <= (past + torch.arange(w, device=device))[:, None]
        if vis is not None:
            m[:n] = False
            m[:n, : vis.shape[1]] = vis.to(device)
        return m

    def step(self, runner, ids, pos, vis, call, eager: bool = False, rows: tuple = ()):
        """Run `call(ids, pos, mask, *rows)` at the fixed width for n = ids' width, the write position at
        runner._len; returns the n real rows. `rows` (a head's features) are padded with zeros.
        eager=True: never replayed (a prefill, the audio)."""
        n = ids.shape[-1]
        w = self.width(n)
        if w > n:
            ids = torch.cat([ids, ids.new_full((1, w - n), self.pad_id)], -1)
            pos = torch.cat([pos, pos[..., -1:] + torch.arange(1, w - n + 1, device=pos.device)], -1)
            rows = tuple(torch.cat([r, r.new_zeros((w - n, *r.shape[1:]))]) for r in rows)
        mask = self.mask(runner._len, n, w, vis, ids.device)
        set_write_position(runner.cache, runner._len)
        if self.graphs and not eager and w in self.widths:
            out = self._replay(runner, w, (ids, pos, mask, *rows), call)
        else:
            out = call(ids, pos, mask, *rows)
        return tuple(o[:n] for o in out) if isinstance(out, tuple) else out[:n]

    # -- CUDA graphs ------------------------------------------------------------------------------
    def _replay(self, runner, w, inputs, call):
        g = self.captured.get(w)
        if g is None:
            g = self.captured[w] = _capture(runner, inputs, call)
        for buf, x in zip(g["inputs"], inputs):
            buf.copy_(x)
        g["graph"].replay()
        out = g["out"]      # the graph's own memory, rewritten by the next replay: copy it out
        return tuple(o.clone() for o in out) if isinstance(out, tuple) else out.clone()


def _capture(runner, inputs, call) -> dict:
    """Capture `call` at these shapes: static input buffers, two warm-up calls on a side stream
    (they write the same slots the real call writes), then the graph. The write position is a
    device tensor the cache advances inside the graph; step() resets it before every replay.
    Forward hooks fire at capture only: what a hook returns (a head's features) must be one of
    the call's outputs, which a replay rewrites in place."""
    bufs = [x.clone() for x in inputs]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            set_write_position(runner.cache, runner._len)
            call(*bufs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    set_write_position(runner.cache, runner._len)
    with torch.cuda.graph(graph):
        out = call(*bufs)
    return {"inputs": bufs, "graph": graph, "out": out}


def apply_engine(cfg, prompt_len: int, *runners) -> tuple[dict, str | None]:
    """engine=static|graphs: give each local runner (a model and a cache) its plan. Returns the
    trace's info["engine"] and a one-line warning, or None. Under a recorder (forward hooks on
    a model): graphs fall back to eager (hooks never run inside a captured graph), and static
    steps run at their own widths (a padding row would read as a fed token)."""
    local = [r for r in runners if getattr(r, "static", "absent") != "absent"]   # not a remote cloud
    recorded = any(hooked(r.model) for r in local)
    if cfg.engine == "eager" or not local:
        return {"engine": cfg.engine}, None
    for r in local:
        check_engine(cfg.engine, r.device)
    why = ("this run is recorded and hooks never run inside a CUDA graph" if recorded else
           "on ZeroGPU the steps are not AOT-compiled here" if os.environ.get("SPACES_ZERO_GPU") else None)
    if cfg.engine == "graphs" and why:
        return {"engine": "eager"}, f"engine=graphs: {why}: it runs eager"
    for r in local:
        r.static = StaticPlan(cfg, prompt_len, graphs=cfg.engine == "graphs")
        r.static.pad = not recorded
    plan = local[0].static
    return {"engine": cfg.engine, "kv_len": plan.kv_len, "widths": list(plan.widths) if plan.pad else [],
            "recorded": recorded}, None


def hooked(model) -> bool:
    """A model with forward hooks (a recording, the cost probe's timer) sees its own forward."""
    return bool(getattr(model, "_forward_hooks", None) or getattr(model, "_forward_pre_hooks", None))
