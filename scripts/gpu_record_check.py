"""The recorder on a GPU: every decoder in examples/decoders/omni/ recorded and judged through
the real `record_clip` on the tiny random-init Qwen2.5-Omni thinker pair (devtools/omni_tiny.py,
written at start, no weights downloaded), once per (device, dtype) run, with the greedy
reference. The verdicts of each run are compared with the first run's (cpu:float32, the one the
test suite asserts): a correct loop must get no ERROR on a GPU or in bf16 either, a broken one
must keep its ERROR. Prints a markdown table and writes JSON:

    .venv/bin/python scripts/gpu_record_check.py [--runs cpu:float32,cuda:float32,cuda:bfloat16]
                                                 [--pair tiny|full] [--clips 2] [--out FILE]

--pair full: random-init thinkers of the published 3B (edge) and 7B (cloud) dimensions, built as
scripts/gpu_check.py builds them (heads 151,936 and 152,064 rows for a 151,665-id tokenizer: the
real pair's widths); on a CPU run their dimensions are shrunk (checks the path, nothing more).

Runs naming cuda are skipped (and say so) on a machine without one.
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OMNI = ROOT / "examples" / "decoders" / "omni"
KNOBS = {"k": 4, "max_new_tokens": 24, "temperature": 0.0, "verify": "greedy", "prompt_type": "detailed"}


def summary(run: str, decoder: str, clip: str, res: dict, seconds: float) -> dict:
    """One recorded clip as a row: finding codes per severity, the reference verdict."""
    by = {s: sorted({f["code"] for f in res.get("findings", []) if f["severity"] == s})
          for s in ("error", "warning", "info")}
    ref = res.get("reference") or {}
    fd = ref.get("first_divergence") or {}
    return {"run": run, "decoder": decoder, "clip": clip, "ok": res["ok"], "error": res.get("error"),
            "errors": by["error"], "warnings": by["warning"], "infos": by["info"],
            "tokens": len(res.get("token_ids", [])), "matches_reference": ref.get("matches"),
            "divergence_cause": fd.get("cause"), "seconds": round(seconds, 2)}


def compare(rows: list[dict]) -> list[dict]:
    """Each row's verdict (ran or failed, ERROR codes) against the first run's for the same
    decoder and clip."""
    first = rows[0]["run"] if rows else None
    base = {(r["decoder"], r["clip"]): (r["ok"], r["errors"]) for r in rows if r["run"] == first}
    for r in rows:
        r["same_errors_as_" + first] = (r["ok"], r["errors"]) == base.get((r["decoder"], r["clip"]))
    return rows


def full_pair(device: str, dtype: str):
    """The 3B/7B random-init pair of gpu_check.py on `device` (shrunk on a CPU)."""
    import torch
    from transformers import WhisperFeatureExtractor

    sys.path.insert(0, str(ROOT / "scripts"))
    import gpu_check as g
    from specdec_core.backends.omni import OmniBackend
    from specdec_core.backends.omni_loading import audio_only_processor

    dt, smoke = getattr(torch, dtype), device == "cpu"
    proc = audio_only_processor(WhisperFeatureExtractor(feature_size=128, sampling_rate=16000),
                                g.real_id_tokenizer())
    return OmniBackend(edge=g.build("3B", device, dt, smoke)[0], cloud=g.build("7B", device, dt, smoke)[0],
                       processor=proc)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="cpu:float32,cuda:float32,cuda:bfloat16")
    ap.add_argument("--pair", choices=["tiny", "full"], default="tiny")
    ap.add_argument("--clips", type=int, default=2, help="the first N sample_audio/*.wav")
    ap.add_argument("--out", default=str(ROOT / "test-artifacts" / "gpu_record_check.json"))
    ap.add_argument("--traceback", action="store_true", help="a failed decode's row keeps its traceback")
    args = ap.parse_args(argv)
    import torch
    import transformers

    from devtools.omni_tiny import make_tiny_pair
    from specdec_core.backends import load_backend
    from specdec_core.recorder.driver.clip import load_function, record_clip

    if args.traceback:                   # debugging this script on a new machine: where it broke
        import traceback

        from specdec_core.recorder.driver import clip as driver
        one_line = driver.failed
        driver.failed = lambda fn, e: one_line(fn, e) + "\n" + "".join(traceback.format_exception(e)[-8:])
    clips = sorted((ROOT / "sample_audio").glob("*.wav"))[:args.clips]
    decoders = sorted(OMNI.glob("*.py"))
    rows, skipped = [], []
    with tempfile.TemporaryDirectory() as tmp:
        paths = make_tiny_pair(tmp)
        for run in args.runs.split(","):
            device, dtype = run.split(":")
            if device == "cuda" and not torch.cuda.is_available():
                skipped.append(run)
                continue
            backend = None                        # the last run's pair leaves the GPU first
            gc.collect()
            if device == "cuda":
                torch.cuda.empty_cache()
            backend = full_pair(device, dtype) if args.pair == "full" else load_backend(
                "omni", edge_model=str(paths["edge"]), cloud_model=str(paths["cloud"]),
                device=device, dtype=dtype, force_cpu=device == "cpu")
            for dec in decoders:
                fn, path = load_function(str(dec))
                for clip in clips:
                    t = time.perf_counter()
                    res = record_clip(fn, path, backend, str(clip), KNOBS, reference=True)
                    rows.append(summary(run, dec.name, clip.name, res, time.perf_counter() - t))
                    print(json.dumps(rows[-1], ensure_ascii=False), flush=True)
    rows = compare(rows)
    out = {"versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                        "cuda": torch.version.cuda,
                        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"},
           "pair": args.pair, "knobs": KNOBS, "skipped_runs": skipped, "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1, ensure_ascii=False))
    key = next((k for k in rows[0] if k.startswith("same_errors_as_")), None) if rows else None
    print("| run | decoder | clip | errors | warnings | = reference | divergence | same errors | s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        errors = ", ".join(r["errors"]) or ("-" if r["ok"] else "failed: " + r["error"][:60])
        print(f"| {r['run']} | {r['decoder']} | {r['clip']} | {errors} | "
              f"{', '.join(r['warnings']) or '-'} | {r['matches_reference']} | {r['divergence_cause']} | "
              f"{r[key]} | {r['seconds']} |")
    if skipped:
        print("skipped (no CUDA here):", ", ".join(skipped))
    print("wrote", args.out)
    return 0 if all(r[key] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
