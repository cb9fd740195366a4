"""`python -m specdec_core run|batch|bench|faults|presets` (contract: ../shared/design.md).

Exit codes: 0 all clips ok, 1 some clip failed, 2 usage error (bad knob, backend, config).
User errors print one line on stderr, never a traceback.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specdec_core.decoding.config import PRESETS, DecodeConfig, preset
from specdec_core.errors import UserError


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own usage errors: one line, exit 2
        self.exit(2, f"specscope: error: {message}\n")


def _add_backend_args(p):
    p.add_argument("--backend", default="demo", help="demo (default) | omni | hf")
    p.add_argument("--edge-model", help="edge model folder or hub id (omni/hf)")
    p.add_argument("--cloud-model", help="cloud model folder or hub id (omni/hf)")
    p.add_argument("--prompt", help="text prompt (hf backend)")
    p.add_argument("--device", help="cuda | cpu (omni)")


def _add_config_args(p):
    p.add_argument("--config", help="JSON file of knobs")
    p.add_argument("--preset", help=f"one of: {', '.join(PRESETS)}")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--fault", dest="faults", action="append", default=[], metavar="NAME")


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="python -m specdec_core", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    r = sub.add_parser("run", help="decode clips and write JSON results")
    r.add_argument("audio", nargs="*", help="audio files (none for --backend hf)")
    _add_backend_args(r)
    _add_config_args(r)
    r.add_argument("--baseline", action="store_true", help="also run the cloud model alone")
    r.add_argument("--out", help="results JSON path (default: stdout)")
    b = sub.add_parser("batch", help="score a manifest of clips")
    b.add_argument("manifest")
    _add_backend_args(b)
    b.add_argument("--config", help="config A (JSON)")
    b.add_argument("--config-b", help="config B (JSON) to compare")
    b.add_argument("--preset", help="preset for config A")
    b.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    b.add_argument("--fault", dest="faults", action="append", default=[], metavar="NAME")
    b.add_argument("--out", required=True, help="output folder")
    b.add_argument("--limit", type=int, help="only the first N clips")
    be = sub.add_parser("bench", help="benchmark vs HF assisted generation and cloud-only")
    _add_backend_args(be)
    be.add_argument("--json", help="write results JSON here")
    be.add_argument("--repeats", type=int, default=3)
    be.add_argument("--k", type=int, default=4)
    be.add_argument("--clips", type=int, default=0, help="number of sample clips (0 = all)")
    be.add_argument("--sweep", action="store_true", help="also sweep k = 1..8")
    be.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    sub.add_parser("faults", help="list the bug zoo")
    sub.add_parser("presets", help="list the presets")
    __import__("specdec_core.recorder.cli").recorder.cli.add_parser(sub)
    return ap


def load_config(path=None, preset_name=None, sets=(), faults=()) -> DecodeConfig:
    d: dict = {}
    if preset_name:
        d.update(preset(preset_name).to_dict())
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise UserError(f"cannot read config {path}: {e.strerror}") from None
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as e:
            raise UserError(f"config {path} is not valid JSON: {e.msg} at line {e.lineno}") from None
        if not isinstance(loaded, dict):
            raise UserError(f"config {path} must be a JSON object of knob: value")
        d.update(loaded)
    for kv in sets:
        if "=" not in kv:
            raise UserError(f"--set expects KEY=VALUE, got {kv!r}")
        k, v = kv.split("=", 1)
        d[k.strip()] = v
    if faults:
        d["faults"] = list(d.get("faults") or []) + list(faults)
    return DecodeConfig.from_dict(d)


def backend_options(args) -> dict:
    return {k: v for k, v in {"edge_model": args.edge_model, "cloud_model": args.cloud_model,
                              "prompt": args.prompt, "device": args.device}.items() if v}


def cmd_run(args) -> int:
    from specdec_core.api import run_clip
    from specdec_core.backends import load_backend

    cfg = load_config(args.config, args.preset, args.sets, args.faults)
    backend = load_backend(args.backend, **backend_options(args))
    sources = args.audio or ([None] if not backend.needs_audio else [])
    if not sources:
        raise UserError("no audio files given")
    results = []
    for src in sources:
        res = run_clip(backend, src, cfg, baseline=args.baseline)
        results.append(res)
        status = f"ok: {res['text']}" if res["ok"] else f"error: {res['error']}"
        print(f"{res['audio']}: {status}", file=sys.stderr)
    out = {"backend": args.backend, "config": cfg.to_dict(), "results": results}
    text = json.dumps(out, ensure_ascii=False, indent=1)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        print(text)
    return 0 if all(r["ok"] for r in results) else 1


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.cmd == "run":
            return cmd_run(args)
        if args.cmd == "batch":
            from specdec_core.evaluation.batch import cmd_batch

            return cmd_batch(args)
        if args.cmd == "bench":
            from specdec_core.evaluation.bench import cmd_bench

            return cmd_bench(args)
        if args.cmd == "record":
            return __import__("specdec_core.recorder.cli").recorder.cli.cmd_record(args)
        if args.cmd == "faults":
            from specdec_core.decoding.faults import FAULTS

            for f in FAULTS.values():
                print(f"{f.name:20s} seed {f.seed:11s} {f.symptom}  -- {f.bug}")
            return 0
        from specdec_core.decoding.config import PRESET_HELP

        for name, d in PRESETS.items():
            print(f"{name:15s} {PRESET_HELP[name]}  {json.dumps(d)}")
        return 0
    except UserError as e:
        print(f"specscope: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
