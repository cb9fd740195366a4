"""`python -m specdec_core record FILE.py[:FUNCTION] [AUDIO ...] [--backend demo|omni|hf]
[--edge-model DIR --cloud-model DIR] [--prompt TEXT] [--set k=4 ...] [--reference]
[--fail-on error|warning] [--out rec.json]`: run the user's own decoder under the Recorder and
diagnose it blind. FUNCTION defaults to `decode`; a text-only pair (hf) takes --prompt and no
audio. Exit codes as for `run` (docs/cli.md)."""
from __future__ import annotations

import contextlib
import importlib.util
import json
import sys
from pathlib import Path

from specdec_core.errors import UserError
from specdec_core.recorder.observe.processing import KNOBS as PROCESSING
from specdec_core.recorder.driver.user_code import EXPECTED, check_call, failed, where as _where

KNOBS = {"k": int, "max_new_tokens": int, "min_new_tokens": int, "temperature": float,
         "verify": str, "rank_threshold": int, "prompt_type": str,
         **PROCESSING}                           # and declared processing (issue 42)
DEFAULTS = {"k": 4, "max_new_tokens": 128, "temperature": 0.0, "verify": "greedy",
            "prompt_type": "detailed"}


def add_parser(sub):
    """The record subparser; the backend options (--backend, --edge-model, ...) are added by
    the CLI from the same definitions as `run`'s."""
    p = sub.add_parser("record", help="record and diagnose your own decoder (FILE.py[:FUNCTION])",
                       description=f"FUNCTION is called as {EXPECTED}.")
    p.add_argument("target", metavar="FILE.py[:FUNCTION]", help="FUNCTION defaults to decode")
    p.add_argument("audio", nargs="*", help="audio files (none for a text-only pair: "
                   "--backend hf --prompt TEXT)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help=f"declared knobs: {', '.join(KNOBS)}")
    p.add_argument("--reference", action="store_true",
                   help="also run the cloud's greedy decode and report the first divergence")
    p.add_argument("--seed", type=int, default=0,
                   help="clip i gets seed SEED+i, for decoders that take a `seed` (default 0)")
    p.add_argument("--out", help="output JSON (default: stdout)")
    return p


def load_function(target: str):
    file, sep, name = target.rpartition(":")
    if not sep and target.endswith(".py"):
        file, name = target, "decode"
    if not file.endswith(".py") or not name.isidentifier():
        raise UserError(f"expected FILE.py or FILE.py:FUNCTION, got {target!r}")
    path = Path(file).resolve()
    if not path.is_file():
        raise UserError(f"no such file: {file}")
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(f"_specscope_user_{path.stem}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    except Exception as e:
        raise UserError(f"cannot import {file}: {_where(e)}") from None
    finally:
        sys.path.remove(str(path.parent))
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise UserError(f"{file} has no function {name!r}")
    return fn, path


def parse_sets(sets) -> dict:
    d = dict(DEFAULTS)
    for kv in sets:
        key, sep, val = kv.partition("=")
        key = key.strip()
        if not sep or key not in KNOBS:
            raise UserError(f"--set expects KEY=VALUE with KEY one of {', '.join(KNOBS)}, got {kv!r}")
        try:
            d[key] = KNOBS[key](val)
        except ValueError:
            raise UserError(f"--set {key}: not a valid {KNOBS[key].__name__}: {val!r}") from None
    from specdec_core.recorder.observe.processing import validate
    validate(d)
    return d


def _extra_knobs(fn, knobs: dict, model_inputs: dict | None = None, seed: int | None = None) -> dict:
    """What a decoder's signature asks for beyond the contract: the declared temperature
    (sampling loops), `model_inputs`, the prompt's model inputs besides the ids (Omni:
    input_features, feature_attention_mask), each only when there is one, and `seed` where the
    signature names one (each clip its own: pooled runs must be independent, issue 36); each
    declared processing knob (draft_top_p, target_repetition_penalty, ...) the signature names."""
    import inspect

    try:
        ps = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    anything = any(p.kind is p.VAR_KEYWORD for p in ps.values())
    extra = {}
    if ("temperature" in ps or anything) and knobs.get("temperature"):
        extra["temperature"] = knobs["temperature"]
    if ("model_inputs" in ps or anything) and model_inputs:
        extra["model_inputs"] = dict(model_inputs)
    if "seed" in ps and seed is not None:
        extra["seed"] = seed
    extra.update({k: knobs[k] for k in PROCESSING if k in ps and knobs.get(k) is not None})
    return extra


def call_kwargs(fn, knobs: dict, stops: tuple, extra: dict, head=None) -> dict:
    """The keyword arguments of the call, checked against fn's signature (UserError, one line,
    naming the file:line of the def and the expected signature)."""
    kwargs = {"k": knobs["k"], "max_new_tokens": knobs["max_new_tokens"], "stop_ids": stops,
              **extra, **({"drafter": head} if head is not None else {})}
    check_call(fn, 4, kwargs)
    return kwargs


def head_drafter(fn, backend):
    """A decoder whose signature names `drafter` drafts with the backend's head (a module fed
    the cloud's hidden states, issue 35): it is handed the head, and the Recorder hooks it."""
    import inspect

    try:
        wants = "drafter" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    head = getattr(backend, "head", None) if wants else None
    if wants and head is None:
        raise UserError(f"the decoder takes a head drafter; the {backend.name} backend has none")
    return head


@contextlib.contextmanager
def kept_configs(*models):
    """The models' configs as they were before the user's decoder, whatever it did or raised:
    the backend is shared (tests, the app's visitors). transformers 5.0.0's early-exit generator
    sets `num_hidden_layers` to the exit layer and raised before restoring it, so every later
    decode on the same cloud ran 4 layers (issue 36)."""
    configs = [m.config for m in models if getattr(m, "config", None) is not None]
    saved = [dict(vars(c)) for c in configs]
    try:
        yield
    finally:
        for c, before in zip(configs, saved):
            for name in set(vars(c)) - set(before):
                delattr(c, name)
            vars(c).update(before)


def numerics_probe(backend, prompt, out, k: int):
    """recording["numerics"]: width-1 vs width-(k+1) logits of the cloud on this clip."""
    from specdec_core.recorder.driver.numerics import probe

    try:
        return probe(backend, prompt, out, k=k)
    except Exception:   # noqa: BLE001 - a probe that cannot run is no finding
        return None


def _private(backend):
    """The backend on private copies of its models (the page: other sessions decode on them)."""
    from specdec_core.recorder.driver.builtin import private

    return private(backend)


def record_clip(fn, path: Path, backend, src, knobs: dict, reference: bool = False,
                seed: int | None = None, isolated: bool = False) -> dict:
    """Record and judge one clip (`record`, the Inspect tab, scripts): `_private` models."""
    import torch

    from specdec_core.api import prepare
    from specdec_core.decoding.config import DecodeConfig
    from specdec_core.decoding.decoder import model_dtype
    from specdec_core.recorder.analyze import analyze
    from specdec_core.recorder.observe.hooks import Recorder

    label = None if src is None else str(src)     # a text-only pair (hf): no audio
    try:
        prompt = prepare(backend, src, DecodeConfig(prompt_type=knobs["prompt_type"]))
    except UserError as e:
        return {"audio": label, "ok": False, "error": str(e)}
    declared = {k: v for k, v in knobs.items() if k != "prompt_type"}
    stops, backend = tuple(backend.stop_ids), _private(backend) if isolated else backend
    head = head_drafter(fn, backend)
    rec = Recorder(backend.edge, backend.cloud, backend.tokenizer, prompt.input_ids, stops,
                   drafter=head, **declared)
    try:
        kwargs = call_kwargs(fn, knobs, stops, _extra_knobs(fn, knobs, prompt.prefill_kwargs, seed), head)
    except UserError as e:                        # a signature that cannot take the call
        return {"audio": label, "ok": False, "error": str(e)}
    sys.path.insert(0, str(path.parent))
    try:
        with rec, torch.no_grad(), kept_configs(backend.edge, backend.cloud):
            out = fn(backend.edge, backend.cloud, backend.tokenizer, prompt.input_ids.clone(), **kwargs)
        out = [int(x) for x in (out.reshape(-1).tolist() if isinstance(out, torch.Tensor) else out)]
    except Exception as e:
        return {"audio": label, "ok": False, "error": failed(fn, e),
                "recording": rec.finish([])}
    finally:
        sys.path.remove(str(path.parent))
    recording = dict(rec.finish(out), backend=backend.name, seed=seed)
    from specdec_core.decoding.dependence import audio_dependence
    dep = audio_dependence(backend, prompt, out)
    recording["numerics"] = numerics_probe(backend, prompt, out, k=knobs["k"])
    recording["dtype"] = model_dtype(backend)          # which dtype ran (--dtype)
    trace, found = analyze(recording, backend.tokenizer, prompt.info, dep)
    res = {"audio": label, "ok": True, "text": trace.text, "token_ids": out, "findings": found,
           "time_split": trace.metrics.get("time_split"), "trace": trace.to_dict(),
           "recording": recording}
    if reference:
        from specdec_core.analysis.divergence import numeric_finding
        from specdec_core.recorder.driver.reference import reference_diff

        res["reference"] = ref = reference_diff(backend, prompt, out, trace, knobs, recording, found)
        fd = ref["first_divergence"]
        if fd is not None and fd["cause"] == "numerics":   # info, never an error (issue 27)
            res["findings"] = found = found + [numeric_finding(fd, recording["numerics"] and
                                                               recording["numerics"]["dtype"])]
    from specdec_core.recorder.report.model_or_decoder import judge_text

    res["findings"] = found = judge_text(found, recording, res.get("reference"))
    if found:
        res["trace"]["diagnostics"] = found
    return res


def pooled_findings(results: list[dict]) -> list[dict]:
    """Checks that need more evidence than one clip gives, over every recorded clip together
    (each registered check's pooled form, over the clips' Evidence, one per distinct run; a
    peaked edge drafts few informative tokens per clip, so a second temperature is often
    invisible on one clip and plain over six)."""
    from specdec_core.analysis.audio_dependence import pooled_edge_mishears
    from specdec_core.recorder import evidence, report
    from specdec_core.recorder.analyze import evidence_of
    from specdec_core.recorder.checks import registry

    runs = evidence.distinct([evidence_of(r["recording"]) for r in results
                              if r.get("ok") and r.get("recording")])
    mishears = pooled_edge_mishears([r.get("trace") for r in results if r.get("ok")])
    return (report.pooled(registry.run_pooled(runs)) if len(runs) > 1 else []) + mishears


def pooled_lines(pooled: list[dict], n: int) -> list[str]:
    """The text report's lines of the pooled findings (`record` and `run`)."""
    return [f"all {n} clips pooled: {f['code']} ({f['severity']}): {f['title']}" for f in pooled]


def _by_severity(findings: list[dict]) -> str:
    """'1 error: stale_cache (explains context_mismatch, unverified_end) · info: vocab_widths':
    the root findings, each with the symptoms folded under it (codes once each)."""
    from specdec_core.cli.reports import folded_codes

    parts, roots = [], [f for f in findings if not f.get("explained_by")]
    for sev, name in (("error", "error"), ("warning", "warning"), ("info", "info")):
        codes = list(dict.fromkeys(folded_codes(f, findings) for f in roots if f["severity"] == sev))
        if codes:
            label = f"{len(codes)} {name}s" if sev != "info" and len(codes) > 1 else (
                f"1 {name}" if sev != "info" else "info")
            parts.append(f"{label}: {', '.join(codes)}")
    if not any(f["severity"] == "error" for f in roots):
        parts.insert(0, "no error finding")
    return " · ".join(parts)


def numerics_lines(res: dict) -> list[str]:
    """The report's 'ties closer than X logits can flip' line and the divergence verdict."""
    from specdec_core.analysis.divergence import summary
    from specdec_core.recorder.driver.numerics import probe_line

    out = [x for x in [probe_line((res.get("recording") or {}).get("numerics"))] if x]
    if res.get("reference"):
        out.append("reference: " + summary(res["reference"]["first_divergence"]))
    return out


def cmd_record(args) -> int:
    from specdec_core.analysis.metrics import time_line
    from specdec_core.api import open_backend

    from specdec_core.cli.reports import fail_on_line

    knobs = parse_sets(args.sets)
    fn, path = load_function(args.target)
    call_kwargs(fn, knobs, (), {})                 # a wrong signature: exit 2 before any load
    backend = open_backend(args)
    from specdec_core.pairs import warning_lines   # the load-time pair check's warnings
    for line in warning_lines(backend):
        print(line, file=sys.stderr)
    sources = args.audio or ([None] if not backend.needs_audio else [])
    if not sources:
        raise UserError(f"no audio files given (the {backend.name} backend decodes audio; a "
                        "text-only pair is --backend hf --prompt TEXT)")
    results = []
    for i, src in enumerate(sources):
        res = record_clip(fn, path, backend, src, knobs, args.reference, seed=args.seed + i)
        results.append(res)
        print(f"{res['audio'] or 'prompt'}: " + (f"recorded; {_by_severity(res.get('findings', []))}"
                                     if res["ok"] else f"error: {res['error']}"), file=sys.stderr)
        if line := time_line(res.get("time_split")):
            print(f"  {line}", file=sys.stderr)
        for line in numerics_lines(res):
            print(f"  {line}", file=sys.stderr)
    pooled = pooled_findings(results)
    for line in pooled_lines(pooled, len(results)):
        print(line, file=sys.stderr)
    text = json.dumps({"backend": args.backend, "declared": knobs, "results": results,
                       "pooled_findings": pooled}, ensure_ascii=False)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        print(text)
    failing = fail_on_line(args.fail_on, [(r["audio"], r.get("findings") or []) for r in results]
                           + [("pooled", pooled)])
    if failing:
        print(failing, file=sys.stderr)
    return 0 if all(r["ok"] for r in results) and not failing else 1
