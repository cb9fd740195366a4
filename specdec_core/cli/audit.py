"""`python -m specdec_core audit --url URL [--model NAME] AUDIO... | --prompt TEXT
[--reference local|URL] [--replay DRAFT_DIR|ngram] [--fail-on error|warning] [--out audit.json]`:
audit a served engine's speculative decoding (docs/audit.md). Exit codes as for `run`."""
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
    p.add_argument("--out", help="output JSON (default: stdout)")
    return p


def cmd_audit(args) -> int:
    from specdec_core.api import load_backend, prepare
    from specdec_core.audit import audit
    from specdec_core.audit.served import Engine
    from specdec_core.cli import reports
    from specdec_core.decoding.config import DecodeConfig

    if args.max_tokens < 1 or args.n != 1:
        raise UserError(f"--max-tokens {args.max_tokens}, n = {args.n}: a greedy audit asks one "
                        "sequence (vLLM refuses n > 1 at temperature 0 and sends speculative "
                        "metrics for n = 1 only) of at least 1 token; nothing was judged")
    Engine(args.url, args.model).close()           # a server that is down: one line, before any load
    backend = load_backend(args.backend, **{k: v for k in ("edge_model", "cloud_model", "device", "dtype")
                                            if (v := getattr(args, k, None))})
    if args.prompt:
        inputs = [("prompt", backend.tokenizer(args.prompt, add_special_tokens=False).input_ids)]
    elif args.audio:
        inputs = [(Path(a).name, prepare(backend, a, DecodeConfig()).input_ids[0].tolist()) for a in args.audio]
    else:
        raise UserError("give audio files or --prompt TEXT")
    rep = audit(backend, args.url, inputs, model=args.model, reference=args.reference,
                replay=args.replay, max_tokens=args.max_tokens, stream=args.stream)
    for r in rep["results"]:
        ref = r["reference"] or {}
        print(f"{r['audio']}: ok: {r['text']}" + ("" if ref.get("matches", True) else
                                                   "  [differs from the reference]"), file=sys.stderr)
    pos = rep["acceptance"]["by_draft_position"]
    if pos:
        print("  acceptance by draft position: " + ", ".join(f"{x['position']}: {x['rate']:.0%}"
                                                          for x in pos), file=sys.stderr)
    for line in reports.finding_lines(rep["findings"]):
        print(f"  {line}", file=sys.stderr)
    text = json.dumps(rep, ensure_ascii=False, indent=1)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        print(text)
    failing = reports.fail_on_line(args.fail_on, [("audit", rep["findings"])])
    if failing:
        print(failing, file=sys.stderr)
    return 1 if failing else 0
