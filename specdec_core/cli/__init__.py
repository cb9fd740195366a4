"""`python -m specdec_core run|record|audit|batch|bench|check|faults|presets` (docs/cli.md).

Exit codes: 0 all clips ok, 1 some clip failed (or `--fail-on` found a finding of that severity
or worse), 2 usage error. User errors print one line on stderr, never a traceback.
This package is the only place that parses arguments and prints (commands in cli/commands.py,
reports in cli/reports.py); the engine modules never import the CLI back."""
from __future__ import annotations

import argparse
import sys

from specdec_core.cli.bench import cmd_bench
from specdec_core.cli.commands import COMMANDS as _COMMANDS
from specdec_core.cli.reports import EXIT_CODES, FAIL_ON
from specdec_core.backends import DTYPES
from specdec_core.decoding.config import PRESETS
from specdec_core.recorder import EXPECTED, KNOBS as RECORD_KNOBS
from specdec_core.cli import audit as audit_cli
from specdec_core.errors import UserError

COMMANDS = {**_COMMANDS, "bench": cmd_bench, "audit": audit_cli.cmd_audit}   # cli/audit.py uses commands


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own usage errors: one line, exit 2
        self.exit(2, f"specscope: error: {message}\n")


def _add_backend_args(p, cloud_url: bool = True, prompt: bool = True):
    p.add_argument("--backend", default="demo", help="demo (default: the shipped pair, audio in) | "
                   "omni (Qwen2.5-Omni thinkers) | hf (any two text causal LMs sharing a tokenizer: "
                   "--edge-model DIR --cloud-model DIR --prompt TEXT, no audio); docs/cli.md")
    p.add_argument("--edge-model", help="edge model folder or hub id (omni/hf)")
    p.add_argument("--cloud-model", help="cloud model folder or hub id (omni/hf); with "
                   "--cloud-url, the served model's name (default: the one it serves)")
    if cloud_url:
        p.add_argument("--cloud-url", help="verify with a cloud behind an OpenAI-compatible server "
                       "(vLLM; `make cloud`), e.g. http://127.0.0.1:8000")
    if prompt:
        p.add_argument("--prompt", help="text prompt (hf backend: no audio files)")
    p.add_argument("--device", help="cuda | cpu (omni)")
    p.add_argument("--dtype", choices=DTYPES, default=None, help="weights and activations: "
                   "float32 | bfloat16 | float16 (default: the backend's own, float32 for demo/hf, "
                   "omni bfloat16 on a GPU); bfloat16 on the demo pair stands in for a GPU run")


def _add_config_args(p, which: str = ""):
    p.add_argument("--config", help=f"JSON file of knobs{which}")
    p.add_argument("--preset", help=f"one of: {', '.join(PRESETS)}{which}")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--fault", dest="faults", action="append", default=[], metavar="NAME")


def _add_output(p):
    """What `finish` reads (run, record, audit): --out, --fail-on, and the exit codes."""
    p.add_argument("--out", help="output JSON (- for stdout; without it only the human summary is printed)")
    p.add_argument("--fail-on", choices=tuple(FAIL_ON), default=None, help="exit 1 when a finding "
                   "of this severity or worse is present (error: errors only; warning: errors and "
                   "warnings), for CI")
    p.epilog = EXIT_CODES
    return p


def _listed(cast, what: str):
    """An argparse type: values separated by commas (blank, null and none skipped)."""
    def parse(text: str) -> list:
        try:
            return [cast(x) for x in text.split(",") if x.strip() and x.strip().lower() not in ("null", "none")]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what} separated by commas, got {text!r}") from None
    return parse


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="python -m specdec_core", description=__doc__.splitlines()[0], epilog=EXIT_CODES)
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    r = sub.add_parser("run", help="decode clips and write JSON results")
    r.add_argument("audio", nargs="*", help="audio files (none for --backend hf)")
    _add_backend_args(r)
    _add_config_args(r)
    r.add_argument("--baseline", action="store_true", help="also run the cloud model alone")
    _add_output(r)
    _add_batch(sub)
    _add_bench(sub)
    c = sub.add_parser("check", help="check an edge/cloud pair before decoding (exit 0 usable, "
                       "1 unusable, 2 usage error)")
    _add_backend_args(c, cloud_url=False, prompt=False)
    c.add_argument("--json", help="also write the report JSON here")
    sub.add_parser("faults", help="list the bug zoo")
    sub.add_parser("presets", help="list the presets")
    _add_backend_args(_add_output(_add_record(sub)), cloud_url=False)
    _add_backend_args(_add_output(audit_cli.add_parser(sub)), cloud_url=False)
    return ap


def _add_record(sub):
    """`record`; its backend options (--backend, --edge-model, ...) are `run`'s own."""
    p = sub.add_parser("record", help="record and diagnose your own decoder (FILE.py[:FUNCTION])",
                       description=f"FUNCTION is called as {EXPECTED}.")
    p.add_argument("target", metavar="FILE.py[:FUNCTION]", help="FUNCTION defaults to decode")
    p.add_argument("audio", nargs="*", help="audio files (none for a text-only pair: "
                   "--backend hf --prompt TEXT)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help=f"declared knobs: {', '.join(RECORD_KNOBS)}")
    p.add_argument("--reference", action="store_true",
                   help="also run the cloud's greedy decode and report the first divergence")
    p.add_argument("--seed", type=int, default=0,
                   help="clip i gets seed SEED+i, for decoders that take a `seed` (default 0)")
    return p


def _add_batch(sub) -> None:
    b = sub.add_parser("batch", help="score a manifest of clips")
    b.add_argument("manifest")
    _add_backend_args(b, cloud_url=False)
    _add_config_args(b, " (config A)")
    b.add_argument("--config-b", help="config B (JSON) to compare")
    b.add_argument("--out", required=True, help="output folder")
    b.add_argument("--limit", type=int, help="only the first N clips")
    b.add_argument("--baseline", metavar="DIR", help="compare row by row with a saved batch "
                   "folder: results.json['baseline'] (tokens, acceptance, findings, speed)")
    b.add_argument("--fail-on-regression", action="store_true",
                   help="exit 1 when the --baseline comparison lists a regression")
    b.add_argument("--cloud-url", dest="cloud_urls", action="extend", nargs="+", metavar="URL",
                   help="verify with cloud servers (vLLM; `make cloud`); several spread the rows "
                   "over the servers (least busy first)")
    b.add_argument("--engine", choices=("local", "ray"), default=None, help="local (default: "
                   "one worker in this process) | ray (edges as Ray actors; docs/scale.md)")
    b.add_argument("--ray-address", help="join this Ray cluster (`ray start --head` prints it); "
                   "default: a local Ray that starts and stops with the command")
    b.add_argument("--workers", type=int, default=None, help="edge workers (Ray actors; "
                   "default: 1 for --engine local, the CPUs for --engine ray); N > 1 without "
                   "--engine runs on Ray")
    b.add_argument("--resume", action="store_true", help="run only the rows missing from "
                   "DIR/results.jsonl")


def _add_bench(sub) -> None:
    be = sub.add_parser("bench", help="benchmark vs HF assisted generation and cloud-only")
    _add_backend_args(be)
    be.add_argument("--json", help="write results JSON here")
    be.add_argument("--repeats", type=int, default=3)
    be.add_argument("--k", type=int, default=4)
    be.add_argument("--clips", type=int, default=0, help="number of sample clips (0 = all)")
    be.add_argument("--trees", action="store_true", help="also compare chain, static and dynamic "
                    "trees and HF assisted generation (identical greedy outputs required)")
    be.add_argument("--sweep", action="store_true", help="also sweep k (classic greedy SD) and "
                    "the entropy threshold at --k, with a plot next to --json")
    be.add_argument("--ks", type=_listed(int, "integers"), default=None, metavar="1,2,...",
                    help="k values of the k sweep (default 1..8)")
    be.add_argument("--thresholds", type=_listed(float, "numbers (nats)"), default=None, metavar="T,T,...",
                    help="entropy thresholds of the threshold sweep, nats (inf = edge only; "
                    "default: quantiles of the edge's draft entropy); classic mode is always in")
    be.add_argument("--sweep-repeats", type=int, default=None, help="repeats of the sweeps "
                    "(default: --repeats)")
    be.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    be.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="time the methods in "
                    "wall time (default) or in the process's CPU time (a loaded machine)")
    be.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="sets",
                    help="decoder knob for our decoder's runs, e.g. engine=static (repeatable)")
    be.add_argument("--quality-budget", type=float, default=0.10, help="largest quality cost "
                    "(1 - prefix agreement with the cloud's greedy output) an advised entropy "
                    "threshold may have (default 0.10)")
    be.add_argument("--no-advice", action="store_true", help="skip the k / threshold advice and "
                    "its rerun")


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.cmd](args)
    except UserError as e:
        said = getattr(e, "detail", "")     # the user's own server's words (the app keeps them off the page)
        print(f"specscope: error: {e}" + (f"; the server said: {said}" if said else ""), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
