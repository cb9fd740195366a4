"""The CLI's commands: options -> engine calls (all through specdec_core.api) -> output.
Each cmd_* returns the exit code; UserError escapes to cli.main, which prints it as one line."""
from __future__ import annotations

import dataclasses
import json
import sys
from contextlib import closing, suppress
from pathlib import Path

from specdec_core.analysis.metrics import time_line
from specdec_core.api import open_backend, run_clip
from specdec_core.cli import reports
from specdec_core.cli.progress import RowProgress
from specdec_core.decoding.config import PRESET_HELP, PRESETS, DecodeConfig, preset
from specdec_core.decoding.faults import FAULTS
from specdec_core.errors import UserError
from specdec_core.evaluation.batch.edges import backend_spec
from specdec_core.evaluation.batch.manifest import read_manifest
from specdec_core.evaluation.batch import watch
from specdec_core.evaluation.batch.scale import run_batch_dir
from specdec_core.pairs import warning_lines


def load_config(path=None, preset_name=None, sets=(), faults=()) -> DecodeConfig:
    """--preset, then --config JSON, then --set KEY=VALUE and --fault NAME (the knob schema's
    parser, DecodeConfig.from_overrides)."""
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
    return DecodeConfig.from_overrides(d, sets, faults)


def open_clips(args, *cfgs) -> tuple:
    """`run` and `record`: the backend (its load-time pair check's warnings printed) and the
    clips to decode (None: the text prompt of a text-only pair)."""
    backend = open_backend(args, *cfgs)
    for line in warning_lines(backend):   # the load-time pair check (specdec_core/pairs)
        print(line, file=sys.stderr)
    sources = args.audio or ([None] if not backend.needs_audio else [])
    if not sources:
        raise UserError(f"no audio files given (the {backend.name} backend decodes audio; a "
                        "text-only pair is --backend hf --prompt TEXT)")
    return backend, sources


def finish(args, out: dict, findings_by_clip: list, ok: bool, indent: int | None = 1) -> int:
    """`run` and `record` (issue 50.7): --out FILE writes the JSON, --out - prints it on stdout;
    without --out the human summary (on stderr) is the whole output. Then the --fail-on verdict
    and the exit code."""
    if args.out == "-":
        print(json.dumps(out, ensure_ascii=False, indent=indent))
    elif args.out:
        write_json(args.out, out, indent)
    else:
        print("(no JSON written: --out FILE, or --out - for stdout)", file=sys.stderr)
    failing = reports.fail_on_line(args.fail_on, findings_by_clip + [("pooled", out.get("pooled_findings", []))])
    if failing:
        print(failing, file=sys.stderr)
    return 0 if ok and not failing else 1


def cmd_run(args) -> int:
    cfg = load_config(args.config, args.preset, args.sets, args.faults)
    backend, sources = open_clips(args, cfg)
    engine_ok(backend, cfg.engine)
    warmed = warm_up(backend, sources[0], cfg)
    results = []
    for i, src in enumerate(sources):
        # clip i gets seed + i, as `record --seed` gives: pooled runs must be independent
        res = run_clip(backend, src, dataclasses.replace(cfg, seed=cfg.seed + i), baseline=args.baseline)
        results.append(res)
        status = f"ok: {res['text']}" if res["ok"] else f"error: {res['error']}"
        print(f"{res['audio']}: {status}", file=sys.stderr)
        tr = res.get("trace") or {}
        for line in [time_line(res["metrics"].get("time_split")) + WARMED * (warmed and not i) if res["ok"] else "",
                     *reports.finding_lines(tr.get("diagnostics") or []),
                     *(reports.numerics_lines(tr.get("numerics"), "cloud-only", res["baseline"])
                       if res["ok"] and res.get("baseline") else [])]:
            if line:
                print(f"  {line}", file=sys.stderr)
    pooled = run_pooled(results, len(results))
    # the contract's keys: each result's trace.info.dtype says which dtype ran
    out = {"backend": args.backend, "config": cfg.to_dict(), "results": [r.to_dict() for r in results],
           "pooled_findings": pooled}
    return finish(args, out, [(r["audio"], (r.get("trace") or {}).get("diagnostics") or [])
                              for r in results if r["ok"]], all(r["ok"] for r in results))


WARMED = " · after an untimed 8-token warm-up, as on the page (a fresh process's first decode pays set-up)"


def warm_up(backend, src, cfg: DecodeConfig) -> bool:
    """A short untimed decode first, as the page's start-up warm-up: a fresh process's first
    decode pays one-time set-up (7-11 s where later ones take 0.6 s). The first time line says so."""
    from specdec_core.api import prepare, stream_prompt

    c = dataclasses.replace(cfg, max_new_tokens=8, min_new_tokens=1, faults=[], time_limit_s=30)
    with suppress(Exception):    # the timed decode reports any real error itself
        return bool(list(stream_prompt(backend, prepare(backend, src, c), c)))
    return False


def engine_ok(backend, engine: str) -> None:
    """engine=graphs on a device without CUDA is a usage error (exit 2) before any clip runs."""
    from specdec_core.decoding.engine import check_engine

    edge = getattr(backend, "edge", None)
    if edge is not None and hasattr(edge, "parameters"):
        check_engine(engine, next(edge.parameters()).device)


def run_pooled(recorded: list[dict], n: int) -> list[dict]:
    """`run`'s pooled findings over its clips: `record`'s checks and report lines."""
    from specdec_core.recorder import pooled_findings

    pooled = pooled_findings(recorded)
    for f in pooled:
        print(f"all {n} clips pooled: {f['code']} ({f['severity']}): {f['title']}", file=sys.stderr)
    return pooled


def cmd_batch(args) -> int:
    configs = {"A": load_config(args.config, args.preset, args.sets, args.faults)}
    if args.config_b:
        configs["B"] = load_config(args.config_b)
    clips = read_manifest(args.manifest)
    if args.limit is not None:
        if args.limit < 1:
            raise UserError(f"--limit must be >= 1, got {args.limit}")
        clips = clips[:args.limit]
    engine = args.engine or ("ray" if (args.workers or 1) > 1 else "local")
    base_rows = watch.load_rows(args.baseline) if args.baseline else None   # before --out is rewritten
    if args.fail_on_regression and not args.baseline:
        raise UserError("--fail-on-regression needs --baseline DIR")
    with closing(RowProgress(args.out)) as progress:
        result, ran = run_batch_dir(backend_spec(args), clips, configs, args.out, engine=engine,
                                    workers=args.workers, ray_address=args.ray_address,
                                    cloud_urls=args.cloud_urls, resume=args.resume, on_row=progress)
    result.backend = args.backend
    if base_rows is not None:
        result.baseline = watch.compare(result.rows, base_rows, args.baseline)
    paths = result.write(args.out)
    print(reports.batch_report(result))
    if result.baseline is not None:
        print(watch.baseline_report(result.baseline))
    print(f"ran {ran} of {len(result.rows)} rows ({engine} engine); "
          f"wrote {', '.join(str(p) for p in paths.values())}")
    if args.fail_on_regression and result.baseline["regressions"]:
        return 1
    return 0 if result.failed == 0 else 1


def cmd_check(args) -> int:
    """The pair check alone (specdec_core/pairs): 0 usable, 1 unusable (an error finding)."""
    from specdec_core.pairs import check_backend

    report = check_backend(args.backend, {k: v for k in ("edge_model", "cloud_model") if (v := getattr(args, k))})
    print(reports.check_report(report))
    if args.json:
        write_json(args.json, report)
    return 0 if report["usable"] else 1


def write_json(path: str, obj, indent: int | None = 1) -> None:
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(obj, indent=indent, ensure_ascii=False), encoding="utf-8")
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror}") from None


def cmd_faults(args) -> int:
    for f in FAULTS.values():
        print(f"{f.name:20s} seed {f.seed:11s} {f.text}")
    return 0


def cmd_presets(args) -> int:
    for name, d in PRESETS.items():
        print(f"{name:15s} {PRESET_HELP[name]}  {json.dumps(d)}")
    return 0


def cmd_record(args) -> int:
    """`record FILE.py[:FUNCTION] [AUDIO ...]`: the user's decoder recorded and judged per clip
    (recorder/driver/clip.record_clip; clip i gets seed SEED+i), then the pooled checks."""
    from specdec_core.recorder import call_kwargs, load_function, parse_sets, record_clip

    knobs = parse_sets(args.sets)
    fn, path = load_function(args.target)
    call_kwargs(fn, knobs, (), {})                 # a wrong signature: exit 2 before any load
    backend, sources = open_clips(args)
    warmed = warm_up(backend, sources[0], DecodeConfig())
    results = []
    seed = knobs.pop("seed", args.seed)           # --set seed=N is --seed N
    for i, src in enumerate(sources):
        res = record_clip(fn, path, backend, src, knobs, args.reference, seed=seed + i)
        results.append(res)
        print(f"{res['audio'] or 'prompt'}: " + (f"recorded; {reports.by_severity(res.get('findings', []))}"
                                                 if res["ok"] else f"error: {res['error']}"), file=sys.stderr)
        for line in [time_line(res.get("time_split")) + WARMED * bool(warmed and not i and res.get("time_split")),
                     *reports.numerics_lines(
                (res.get("recording") or {}).get("numerics"), "reference", res.get("reference"))]:
            if line:
                print(f"  {line}", file=sys.stderr)
    pooled = run_pooled(results, len(results))
    # a recording is large: its JSON is written compact
    return finish(args, {"backend": args.backend, "declared": knobs, "results": [r.to_dict() for r in results],
                         "pooled_findings": pooled},
                  [(r["audio"], r.get("findings") or []) for r in results],
                  all(r["ok"] for r in results), indent=None)


COMMANDS = {"run": cmd_run, "batch": cmd_batch, "faults": cmd_faults,
            "presets": cmd_presets, "record": cmd_record, "check": cmd_check}
