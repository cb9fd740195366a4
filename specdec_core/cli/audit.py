"""`python -m specdec_core audit --url URL [--compare-url URL_B] [--model NAME] AUDIO... | --prompt TEXT
[--reference local|URL] [--replay DRAFT_DIR|ngram] [--fail-on error|warning] [--out FILE|-]`: audit a served
engine's speculative decoding (docs/audit.md). As `run`: a summary on stderr, the JSON only with --out."""
from __future__ import annotations

import sys
from pathlib import Path

from specdec_core.errors import UserError


def add_parser(sub):
    """The audit subparser; --backend / --prompt (the prompt ids' builder), --out and --fail-on are
    added by the CLI from `run`'s definitions."""
    p = sub.add_parser("audit", help="audit a served engine's speculative decoding (vLLM)")
    p.add_argument("audio", nargs="*", help="audio files: their prompt ids are built by the backend and sent as "
                   "ids (or --prompt TEXT)")
    p.add_argument("--url", required=True, help="the served engine (OpenAI-compatible, e.g. `make cloud-spec`: "
                   "http://127.0.0.1:8000)")
    p.add_argument("--compare-url", metavar="URL_B", help="a second engine audited on the same prompts, side by "
                   "side: where outputs differ, acceptance by draft position, each engine's definitions")
    p.add_argument("--model", help="the served model's name (default: the one it serves)")
    p.add_argument("--reference", default="local", help="local (the backend's cloud model, default) | URL of a "
                   "server of the same model without speculation")
    p.add_argument("--replay", metavar="DRAFT_DIR|ngram", help="re-run the declared drafter here (its folder, or "
                   "vLLM's n-gram rule, min 1 max 3) and re-judge every step")
    p.add_argument("--max-tokens", type=int, default=48, help="tokens per request (default 48)")
    p.add_argument("-n", type=int, default=1, help="sequences per request (default 1; vLLM reports speculative "
                   "metrics for n = 1 only)")
    p.add_argument("--stream", choices=("usage", "no-usage"), help="stream the completions, with or without "
                   "stream_options.include_usage (vLLM sends the metrics on the usage chunk only)")
    return p


def cmd_audit(args) -> int:
    from specdec_core.api import load_backend, prepare
    from specdec_core.audit import audit, compare
    from specdec_core.audit.served import Engine
    from specdec_core.cli.commands import finish
    from specdec_core.decoding.config import DecodeConfig
    from transformers.utils import logging as hf_logging

    if args.max_tokens < 1 or args.n != 1:
        raise UserError(f"--max-tokens {args.max_tokens}, n = {args.n}: a greedy audit asks one sequence (vLLM "
                        "refuses n > 1 at temperature 0 and sends speculative metrics for n = 1 only) of at least "
                        "1 token; nothing was judged")
    hf_logging.disable_progress_bar()               # no "Loading weights" bar on the summary
    sides = [(u, m) for u, m in ((args.url, args.model), (args.compare_url, None)) if u]   # --model: A's
    for url, model in sides:
        Engine(url, model).close()                 # a server that is down: one line, before any load
    backend = load_backend(args.backend, **{k: v for k in ("edge_model", "cloud_model", "device", "dtype")
                                            if (v := getattr(args, k, None))})
    if args.prompt:
        inputs = [("prompt", backend.tokenizer(args.prompt, add_special_tokens=False).input_ids)]
    elif args.audio:
        inputs = [(Path(a).name, prepare(backend, a, DecodeConfig()).input_ids[0].tolist()) for a in args.audio]
    else:
        raise UserError("give audio files or --prompt TEXT")
    reps = [audit(backend, url, inputs, model=model, reference=args.reference, replay=args.replay,
                  max_tokens=args.max_tokens, stream=args.stream) for url, model in sides]
    lines = [line for side, rep in zip("AB", reps) for line in _summary(rep, side if len(reps) > 1 else "")]
    rep = reps[0]
    if len(reps) > 1:
        rep = dict(rep, compared_with=reps[1], comparison=compare(reps[0], reps[1], backend.tokenizer))
        lines += [f"{x['audio']}: {x['verdict']}" for x in rep["comparison"]["requests"]] + [
            f"  {d}" for d in rep["comparison"]["definitions"]]
    print("\n".join(lines), file=sys.stderr)
    return finish(args, rep, [(x["engine"]["url"], x["findings"]) for x in reps], True)


def _summary(rep: dict, side: str) -> list[str]:
    """Per request its text, numbers (audit.summary) and with --replay what the replay judged; the acceptance by
    draft position; the findings line and the findings, as `run` says them."""
    from specdec_core.audit import NO_FINDINGS, summary
    from specdec_core.cli import reports

    out, replay = [f"{side}: {rep['engine']['url']}"] if side else [], rep["engine"]["replay"]
    for i, r in enumerate(rep["results"]):
        out += [f"{r['audio']}: ok: {r['text']}", f"  {summary(rep, i)}"]
        off = [f["title"].split(": ", 1)[1] for f in rep["findings"] if f["code"] == "replay_mismatch"
               and f["evidence"].get("request") == r["audio"]]
        out += [f"  replayed {replay}: " + (off or [f"{len(r['steps'])} steps re-judged, none off the "
                                                   "exact greedy rule"])[0]] if replay else []
    pos = rep["acceptance"]["by_draft_position"]
    out += ["  acceptance by draft position: " + ", ".join(f"{x['position']}: {x['rate']:.0%}" for x in pos)] * bool(pos)
    return out + [f"audit: {reports.by_severity(rep['findings']) if rep['findings'] else NO_FINDINGS}",
                  *(f"  {line}" for line in reports.finding_lines(rep["findings"]))]
