#!/usr/bin/env bash
# The transformers range, both ends (issue 26; docs/versions.md). `make test` runs
#   scripts/range_test.sh oldest    the lowest transformers pyproject.toml declares
#   scripts/range_test.sh middle    the median release pip offers between oldest and newest
#   scripts/range_test.sh newest    the newest release pip can install today
#   scripts/range_test.sh 5.23.0    any one release
# after the whole suite on the lock: every recorder, backend, Omni and pair-check test
# ($RANGE_TESTS) in a virtualenv of that transformers, built once per machine under
# ${SPECSCOPE_CLOUD_VENV_ROOT:-~/.cache/specscope}/tf-<version>-<hash> (hash of the lock, the
# version and python's, like scripts/cloud/cloud.sh). Everything else comes from
# requirements.lock; the packages a release pins differently (tokenizers, huggingface_hub) are
# let go only when pip cannot satisfy the lock. The checkout runs from PYTHONPATH, so one
# virtualenv serves every clone. `newest` equal to the lock's version is skipped (the whole
# suite just ran on it). Exits with pytest's status. RANGE_DRY_RUN=1: print "which version venv"
# and stop (tests/test_versions.py).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PY="${PY:-python3}"
LOCK="$ROOT/requirements.lock"
RANGE_TESTS="${RANGE_TESTS:-tests/test_recorder_*.py tests/test_record_isolation.py tests/test_backends.py tests/test_omni.py tests/test_check.py tests/test_versions.py}"
cd "$ROOT"
# downloads are kept beside the range virtualenvs: a new lock or release rebuilds a virtualenv
# from this cache instead of the network (CI's fresh clones share ~/.cache)
export PIP_CACHE_DIR="${PIP_CACHE_DIR:-${SPECSCOPE_CLOUD_VENV_ROOT:-$HOME/.cache/specscope}/pip-cache}"

locked() { grep -E "^$1==" "$LOCK" | head -1 | cut -d= -f3; }
oldest() { grep -oE '"transformers>=[0-9][0-9.]*' pyproject.toml | head -1 | sed 's/.*>=//'; }
releases() { "${PIP:-$ROOT/.venv/bin/pip}" index versions transformers 2>/dev/null | sed -nE 's/^Available versions: //p' | tr -d ' ' | tr ',' '\n'; }
newest() { "${PIP:-$ROOT/.venv/bin/pip}" index versions transformers 2>/dev/null | sed -nE '1s/^transformers \(([^)]*)\).*/\1/p'; }
# the median final release in [oldest, newest] (sorted by version)
middle() {
  local lo hi
  lo="$(oldest)"; hi="$(newest)"
  [ -n "$hi" ] || return 0
  releases | grep -E '^[0-9]+(\.[0-9]+)*$' | sort -V |
    awk -v lo="$lo" -v hi="$hi" '$0==lo{on=1} on{v[n++]=$0} $0==hi{on=0} END{if (n) print v[int(n/2)]}'
}

# quiet pip, without this machine's notes about index folders it skips
pipq() {
  local rc=0
  "$VENV/bin/pip" -q "$@" > "$VENV.out" 2>&1 || rc=$?
  grep -v 'is ignored: it is neither a file nor a directory' "$VENV.out" >&2 || true
  rm -f "$VENV.out"
  return $rc
}

want="${1:-oldest}"
case "$want" in
  oldest) version="$(oldest)" ;;
  newest) version="$(newest)" ;;
  middle) version="$(middle)" ;;
  *) version="$want" ;;
esac
if [ -z "$version" ]; then
  echo "range: cannot tell the $want transformers release (no index reachable?); skipped" >&2
  exit 0
fi
if [ "$want" = newest ] && [ "$version" = "$(locked transformers)" ]; then
  echo "range: newest transformers $version is the lock's: the whole suite just ran on it; skipped"
  exit 0
fi

HASH="$( (cat "$LOCK"; echo "$version overlay"; "$PY" -c 'import sys; print(sys.version_info[:2])') | sha256sum | cut -c1-12)"
VROOT="${SPECSCOPE_CLOUD_VENV_ROOT:-$HOME/.cache/specscope}"
VENV="$VROOT/tf-$version-$HASH"
if [ -n "${RANGE_DRY_RUN:-}" ]; then echo "$want $version $VENV"; exit 0; fi
# The lock's packages come from the test virtualenv (the one $PIP belongs to: make test's .venv);
# the range virtualenv is an overlay holding only transformers and what that release needs
# instead of the lock's (tokenizers, huggingface_hub). A .pth file adds the test virtualenv's
# site-packages, named by SPECSCOPE_LOCK_SITE, after the overlay's own, so one overlay serves
# every clone's .venv of this lock; building it installs a few wheels, not the whole lock.
LOCKPY="$(dirname "${PIP:-$ROOT/.venv/bin/pip}")/python"
SPECSCOPE_LOCK_SITE="$("$LOCKPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
export SPECSCOPE_LOCK_SITE
if [ "$("$LOCKPY" -c 'import sys; print(sys.version_info[:2])')" != "$("$PY" -c 'import sys; print(sys.version_info[:2])')" ]; then
  echo "range: $LOCKPY and $PY are different pythons; the overlay needs one" >&2
  exit 2
fi
t0=$SECONDS
if [ ! -f "$VENV/.ready" ]; then
  mkdir -p "$VROOT"
  exec 9>"$VENV.lock"
  flock 9
  if [ ! -f "$VENV/.ready" ]; then
    rm -rf "$VENV"
    echo "range: building $VENV (transformers $version over the lock's packages; once per machine)" >&2
    "$PY" -m venv "$VENV"
    own="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    echo 'import os, site; (p := os.environ.get("SPECSCOPE_LOCK_SITE")) and site.addsitedir(p)' > "$own/zz-specscope-lock.pth"
    strict="$(mktemp)"; loose="$(mktemp)"
    grep -vE '^(transformers|specscope)==' "$LOCK" > "$strict"
    grep -vE '^(transformers|specscope|tokenizers|huggingface[-_]hub|hf-xet|safetensors)==' "$LOCK" > "$loose"
    if ! pipq install -c "$strict" "transformers==$version" 2>"$VENV.pip.log"; then
      echo "range: transformers $version needs other tokenizers/huggingface_hub than the lock; letting those go" >&2
      pipq install -c "$loose" "transformers==$version"
    fi
    rm -f "$strict" "$loose"
    touch "$VENV/.ready"
    echo "range: built in $((SECONDS - t0)) s" >&2
  fi
  exec 9>&-
fi
# both cores when pytest-xdist is there (tests/conftest.py keeps tests xdist-safe)
xdist_args() {
  if "$VENV/bin/python" -c 'import xdist' 2>/dev/null; then echo "-n ${PYTEST_WORKERS:-2} --dist loadfile"; fi
}
echo "range: transformers $version ($want): $RANGE_TESTS"
t1=$SECONDS
set +e
# shellcheck disable=SC2086
# test_recorder_compiled.py (dynamo tracing the hooks: minutes of compiling on 2 cores) runs on
# the lock only; RANGE_SKIP= runs it here too (pytest's --ignore does not drop a file named
# on its command line, so the list is filtered here)
files=$(for f in $RANGE_TESTS; do [ "$f" = "${RANGE_SKIP-tests/test_recorder_compiled.py}" ] || echo "$f"; done)
PYTHONPATH="$ROOT" "$VENV/bin/python" -m pytest -q -p no:cacheprovider $(xdist_args) $files
rc=$?
echo "range: transformers $version: pytest exit $rc in $((SECONDS - t1)) s (venv ready in $((t1 - t0)) s)"
exit $rc
