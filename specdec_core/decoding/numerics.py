"""The numerics probe: how far the cloud's logits move between a decode-width forward (1 new
token) and a verify-width forward (k+1) at the same positions of this clip, teacher-forced on a
few windows of the output (docs/recorder.md, "Bug or numerics?")."""
from __future__ import annotations

import torch

WINDOWS = 6


def window_starts(prompt_len: int, n_out: int, width: int, windows: int = WINDOWS) -> list[int]:
    """Positions s (absolute, >= prompt_len) whose window full[s:s+width] lies in the output."""
    first, last = prompt_len, prompt_len + n_out - width
    if last < first:
        return []
    if windows <= 1 or last == first:
        return [first]
    step = (last - first) / (windows - 1)
    return sorted({first + round(j * step) for j in range(windows)})


@torch.inference_mode()
def probe(backend, prompt, out_ids, k: int = 4, windows: int = WINDOWS) -> dict | None:
    """{"dtype", "decode_width", "verify_width", "positions", "max_logit_diff", "at" (output index of
    the largest difference), "flips" (positions whose argmax differs)}, or None without a local cloud
    model (a remote cloud has its own arithmetic) or for too short an output."""
    from specdec_core.decoding.decoder import model_dtype

    cloud = getattr(backend, "cloud", None)
    if cloud is None or not hasattr(cloud, "parameters") or not hasattr(backend, "make_runner"):
        return None
    out = [int(x) for x in out_ids]
    P, width = prompt.length, max(1, int(k)) + 1
    full = prompt.input_ids[0].tolist() + out
    starts = window_starts(P, len(out), width, windows)
    if not starts:
        return None
    r = backend.make_runner(cloud, "cloud")
    if not all(hasattr(r, m) for m in ("feed", "crop")):   # a cloud behind a server: its own
        return None                                        # numerics, not this model's
    r.prefill(prompt)
    worst, at, flips, n = 0.0, None, 0, 0
    for s in starts:
        if s > r.seen:
            r.feed(full[r.seen:s])          # catch up (the first one also carries the prompt)
        wide = r.feed(full[s:s + width])
        r.crop(s)
        narrow = torch.cat([r.feed([t]) for t in full[s:s + width]])
        r.crop(s)
        diff = (wide - narrow).abs().amax(-1)
        j = int(diff.argmax())
        if float(diff[j]) > worst or at is None:
            worst, at = float(diff[j]), s + j + 1 - P
        flips += int((wide.argmax(-1) != narrow.argmax(-1)).sum())
        n += width
    return {"dtype": model_dtype(backend), "decode_width": 1, "verify_width": width,
            "positions": n, "max_logit_diff": round(worst, 5), "at": at, "flips": flips}


def probe_line(num: dict | None) -> str | None:
    """The reports' line: 'numerics (bfloat16): width-1 and width-5 forwards differ by up to
    0.0625 logits on 30 positions; ties closer than 0.0625 logits can flip'."""
    if not num:
        return None
    x, w, n = num.get("max_logit_diff"), num.get("verify_width"), num.get("positions")
    both = f"numerics ({num.get('dtype')}): width-1 and width-{w} forwards"
    if not x:
        return f"{both} agreed on the {n} probed positions; exact ties can still flip"
    return f"{both} differ by up to {x:.4g} logits on {n} positions; ties closer than {x:.4g} logits can flip"
