"""Several `python -m specdec_core ...` command lines in ONE fresh interpreter, one after the
other: each start of a CLI process costs seconds of imports (torch, transformers), far more than
a usage error's own work, so tests of many cheap command lines share one start.

Each command line runs as `python -m specdec_core` runs it: `sys.exit(main(argv))`, an uncaught
exception printed as a traceback with exit status 1. Its stdout and stderr are caught at the file
descriptors (also what C code or a child process writes), and Python's warnings are shown again for
each command line as in a fresh process. Use it only for command lines whose outcome does not depend
on being the process's first (usage errors, listings); a test of a fresh process's behaviour
(the first decode's warm-up) keeps a process of its own.

    results = run_many([["run", "--set", "k=0", ...], ["faults"]])   # CompletedProcess each
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_many(cases, cwd=ROOT, env=None, timeout=None) -> list[subprocess.CompletedProcess]:
    """Run each argv of `cases` (lists of str-able) through the CLI in one subprocess; `timeout`
    for them all, by default 300 s per command line (what a process of its own was given)."""
    cases = [[str(a) for a in argv] for argv in cases]
    timeout = timeout or 300 * len(cases)
    with tempfile.TemporaryDirectory() as d:
        spec, out = Path(d) / "cases.json", Path(d) / "results.json"
        spec.write_text(json.dumps(cases), encoding="utf-8")
        p = subprocess.run([sys.executable, __file__, str(spec), str(out)], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=timeout)
        if p.returncode != 0 or not out.is_file():
            raise RuntimeError(f"cli_many itself failed ({p.returncode}):\n{p.stderr[-3000:]}")
        got = json.loads(out.read_text(encoding="utf-8"))
    return [subprocess.CompletedProcess([sys.executable, "-m", "specdec_core", *argv], r["rc"],
                                        r["stdout"], r["stderr"]) for argv, r in zip(cases, got)]


def _one(argv: list[str], main) -> int:
    import traceback

    try:
        code = main(argv)
    except SystemExit as e:          # argparse's usage errors, sys.exit in a command
        code = e.code
    except BaseException:            # what the interpreter does with an uncaught exception
        traceback.print_exc()
        return 1
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)      # sys.exit("message")
    return 1


def _child(spec: str, out: str) -> None:
    import warnings

    sys.path.insert(0, os.getcwd())          # as `python -m` puts the working directory first
    sys.argv = [str(Path.cwd() / "specdec_core" / "__main__.py")]
    from specdec_core.cli import main

    filters = list(warnings.filters)
    saved = os.dup(1), os.dup(2)
    results = []
    for argv in json.loads(Path(spec).read_text(encoding="utf-8")):
        warnings.filters[:] = filters
        warnings._filters_mutated()           # forget which warnings were shown already
        files = [tempfile.TemporaryFile(), tempfile.TemporaryFile()]
        sys.stdout.flush(), sys.stderr.flush()
        os.dup2(files[0].fileno(), 1), os.dup2(files[1].fileno(), 2)
        try:
            rc = _one(argv, main)
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(saved[0], 1), os.dup2(saved[1], 2)
        text = []
        for f in files:
            f.seek(0)
            text.append(f.read().decode("utf-8", errors="replace"))
            f.close()
        results.append({"rc": rc, "stdout": text[0], "stderr": text[1]})
    Path(out).write_text(json.dumps(results), encoding="utf-8")


if __name__ == "__main__":
    sys.path.pop(0)                   # this file's folder (tests/): not on a CLI's path
    _child(*sys.argv[1:3])
