"""`python -m specdec_core audit --url URL [--compare-url URL_B] [--model NAME] AUDIO... | --prompt
TEXT [--reference local|URL] [--replay DRAFT_DIR|ngram] [--fail-on error|warning] [--out FILE|-]`:
audit a served engine's speculative decoding (docs/audit.md). As `run`: a summary on stderr, the
JSON only with --out (- for stdout). Exit codes as for `run`."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from specdec_core.errors import UserError


def add_parser(sub):
    """The audit subparser; --backend / --prompt (the prompt ids' builder) and --fail-on are
    added by the CLI from `run`'s definitions."""
    p = sub.add_parser("audit", help="audit a served engine's speculative decoding (vLLM)")
    p.add_argument("audio", nargs="*", help="audio files: their prompt ids are built by the "
                   "backend and sent as ids (or --prompt TEXT)")
    p.add_argument("--url", required=True, help="the served engine (OpenAI-compatible, e.g. "
                   "`make cloud-spec`: http://127.0.0.1:8000)")
    p.add_argument("--compare-url", metavar="URL_B", help="a second served engine audited on the "
                   "same prompts, side by side: where the outputs differ, acceptance by draft "
                   "position on each side, the definitions each engine's figures use")
    p.add_argument("--model", help="the served model's name (default: the one it serves)")
    p.add_argument("--reference", default="local", help="local (the backend's cloud model, "
                   "default) | URL of a server of the same model without speculation")
    p.add_argument("--replay", metavar="DRAFT_DIR|ngram", help="re-run the declared drafter here "
                   "(its folder, or vLLM's n-gram rule, min 1 max 3) and re-judge every step")
    p.add_argument("--max-tokens", type=int, default=48, help="tokens per request (default 48)")
    p.add_argument("-n", type=int, default=1, help="sequences per request (default 1; vLLM "
                   "reports speculative metrics for n = 1 only)")
    p.add_argument("--stream", choices=("usage", "no-usage"), help="stream the completions, with "
                   "or without stream_options.include_usage (vLLM sends the metrics on the usage "
                   "chunk only)")
    p.add_argument("--out", help="output JSON (- for stdout; default: none, the summary only)")
    return p


def cmd_audit(args) -> int:
    from specdec_core.api import load_backend, prepare
    from specdec_core.audit import audit, compare
    from specdec_core.audit.served import Engine
    from specdec_core.cli import reports
    from specdec_core.decoding.config import DecodeConfig

    if args.max_tokens < 1 or args.n != 1:
        raise UserError(f"--max-tokens {args.max_tokens}, n = {args.n}: a greedy audit asks one "
                        "sequence (vLLM refuses n > 1 at temperature 0 and sends speculative "
                        "metrics for n = 1 only) of at least 1 token; nothing was judged")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()               # no "Loading weights" bar on the summary
    for url, model in ((args.url, args.model), (args.compare_url, None)):
        if url:
            Engine(url, model).close()             # a server that is down: one line, before any load
    backend = load_backend(args.backend, **{k: v for k in ("edge_model", "cloud_model", "device", "dtype")
                                            if (v := getattr(args, k, None))})
    if args.prompt:
        inputs = [("prompt", backend.tokenizer(args.prompt, add_special_tokens=False).input_ids)]
    elif args.audio:
        inputs = [(Path(a).name, prepare(backend, a, DecodeConfig()).input_ids[0].tolist()) for a in args.audio]
    else:
        raise UserError("give audio files or --prompt TEXT")
    reps = [audit(backend, url, inputs, model=model, reference=args.reference, replay=args.replay,
                  max_tokens=args.max_tokens, stream=args.stream)    # --model names A's model only
            for url, model in ((args.url, args.model), (args.compare_url, None)) if url]
    for side, rep in zip("AB" if args.compare_url else " ", reps):
        _summary(rep, f"{side}: {rep['engine']['url']}" if args.compare_url else "")
    rep = reps[0]
    if args.compare_url:
        rep = dict(rep, compared_with=reps[1], comparison=compare(reps[0], reps[1], backend.tokenizer))
        for x in rep["comparison"]["requests"]:
            print(f"{x['audio']}: {x['verdict']}", file=sys.stderr)
        for line in rep["comparison"]["definitions"]:
            print(f"  {line}", file=sys.stderr)
    if args.out == "-":
        print(json.dumps(rep, ensure_ascii=False, indent=1))
    elif args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(rep, ensure_ascii=False, indent=1), encoding="utf-8")
    else:
        print("(no JSON written: --out FILE, or --out - for stdout)", file=sys.stderr)
    failing = reports.fail_on_line(args.fail_on, [(x["engine"]["url"], x["findings"]) for x in reps])
    if failing:
        print(failing, file=sys.stderr)
    return 1 if failing else 0


def _summary(rep: dict, title: str) -> None:
    """Per request: its text, its numbers (audit.summary), the replay's verdict with --replay; the
    acceptance by draft position; the findings line and the findings, as `run` says them."""
    from specdec_core.audit import summary
    from specdec_core.cli import reports

    if title:
        print(title, file=sys.stderr)
    for i, r in enumerate(rep["results"]):
        print(f"{r['audio']}: ok: {r['text']}", file=sys.stderr)
        print(f"  {summary(rep, i)}", file=sys.stderr)
        if rep["engine"]["replay"]:
            off = [f for f in rep["findings"] if f["code"] == "replay_mismatch"
                   and f["evidence"].get("request") == r["audio"]]
            print(f"  replayed {rep['engine']['replay']}: " + (off[0]["title"].split(": ", 1)[1] if off else
                  f"{len(r['steps'])} steps re-judged, each accepted count the exact greedy rule's"),
                  file=sys.stderr)
    pos = rep["acceptance"]["by_draft_position"]
    if pos:
        print("  acceptance by draft position: " + ", ".join(f"{x['position']}: {x['rate']:.0%}"
                                                          for x in pos), file=sys.stderr)
    print(f"audit: {reports.by_severity(rep['findings'])}" if rep["findings"] else
          "audit: no findings in what a served engine shows (its output against the reference, its "
          "counters, acceptance by position); caches and positions inside it are not visible", file=sys.stderr)
    for line in reports.finding_lines(rep["findings"]):
        print(f"  {line}", file=sys.stderr)
