#!/usr/bin/env bash
# `make lock`: refresh requirements.lock, the exact versions `make demo` and `make test` install.
# A throwaway virtualenv gets a fresh, unpinned install of the project with every extra (only
# torch stays at $TORCH: an unpinned torch would pull the CUDA build), then pip freeze writes
# the lock. Run `make test` afterwards: the lock is only as good as the run that tested it.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PY:-python3}"
TORCH="${TORCH:-torch==2.13.0}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
cd "$ROOT"
"$PY" -m venv "$TMP/venv"
"$TMP/venv/bin/pip" install -q --upgrade pip
"$TMP/venv/bin/pip" install -q "$TORCH"
"$TMP/venv/bin/pip" install -q -e '.[test,bench,scale]' "$TORCH"
{
  echo "# The versions the last green \`make test\` ran on; \`make demo\` and \`make test\` install"
  echo "# from here. Refresh: make lock (scripts/lock.sh), then make test. docs/versions.md"
  echo "# $("$TMP/venv/bin/python" -c 'import platform; print("python", platform.python_version())'), written $(date -u +%Y-%m-%d)"
  # torch's local label (+cpu) is dropped: torch==X matches the CPU wheel where pip finds one
  "$TMP/venv/bin/pip" freeze --exclude-editable | grep -v '^#' | sed -E 's/^(torch==[^+]+)\+.*/\1/'
} > requirements.lock.new
mv requirements.lock.new requirements.lock
echo "requirements.lock: $(grep -vc '^#' requirements.lock) packages, $(grep -E '^(torch|transformers)==' requirements.lock | tr '\n' ' ')"
