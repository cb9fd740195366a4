#!/usr/bin/env bash
# The transformers range (issue 26, 50; docs/versions.md). `make test` runs
#   scripts/range_test.sh oldest    the lowest transformers pyproject.toml declares
#   scripts/range_test.sh middle    the median release pip offers between oldest and newest
#   scripts/range_test.sh newest    the newest release pip can install today
#   scripts/range_test.sh 5.23.0    any one release
#   scripts/range_test.sh report oldest middle   wait for the runs `make test` started side by
#                                   side (test-artifacts/range-<end>.log and .rc), print their
#                                   logs, exit 1 if one failed or did not finish
# after the whole suite on the lock: the API-seam tests ($RANGE_TESTS, below: node ids of the
# suite's own tests; RANGE_TESTS="tests/test_recorder_*.py ..." runs more) in a virtualenv of
# that transformers, built once per machine under
# ${SPECSCOPE_CLOUD_VENV_ROOT:-~/.cache/specscope}/tf-<version>-<hash> (hash of the lock, the
# version and python's, like scripts/cloud/cloud.sh). That virtualenv holds transformers and
# only what the release needs instead of the lock's (tokenizers, huggingface_hub: let go only
# when pip cannot satisfy the lock); every other package is the test virtualenv's (the .venv
# whose pip is $PIP), read through a .pth file. The checkout runs from PYTHONPATH, so one
# virtualenv serves every clone. `newest` equal to the lock's version is skipped (the whole
# suite just ran on it). Exits with pytest's status. RANGE_DRY_RUN=1: print "which version venv"
# and stop (tests/test_versions.py); RANGE_BUILD_ONLY=1: build the virtualenv and stop (make test
# builds both ends in the background while the suite runs). PYTEST_WORKERS=0: one pytest process
# (make test runs the floor and the middle so, side by side, after the suite).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PY="${PY:-python3}"
LOCK="$ROOT/requirements.lock"
# The API seams between SpecScope and transformers, at one release (docs/versions.md, "What the
# range proves"): compat.py's cache names and static layers, the recorder's hooks on a model's
# forward (a positional cache, a stale cache found), backend loading, the Omni processor and
# thinker (prompt, positions after a rollback, generate), the tokenizer probes of the pair check,
# and generate()'s assisted paths the examples use (prompt lookup, early exit, assistant model,
# universal assisted). Each is an existing test of the suite; node ids, not whole files.
SEAMS="tests/test_backends.py
tests/test_engine.py::test_static_runner_matches_eager_runner_and_rolls_back_by_write_position
tests/test_engine.py::test_static_on_tiny_omni_thinkers_matches_eager_and_generate
tests/test_engine.py::test_static_layers_keep_a_write_position_or_are_given_one
tests/test_omni.py::test_greedy_speculative_equals_thinker_generate_with_rollbacks
tests/test_omni.py::test_runner_positions_survive_rollback
tests/test_omni.py::test_prompt_format
tests/test_omni.py::test_published_whole_model_layout_loads_the_thinker
tests/test_recorder_omni.py::test_hf_assisted_generation_on_the_thinkers
tests/test_recorder_omni.py::test_inputs_embeds_audio_prefill_is_understood
tests/test_recorder_omni.py::test_no_rollback_gets_stale_cache
tests/test_recorder_families.py::test_hf_drafting_families_record_clean
tests/test_recorder_families.py::test_cache_passed_positionally_is_followed
tests/test_recorder_families.py::test_no_revert_keeps_its_cache_findings_and_causes_follow_the_evidence
tests/test_recorder_families.py::test_a_failing_decoder_leaves_the_shared_models_as_they_were
tests/test_recorder_cross_tokenizer.py::test_correct_loop_gets_no_error_and_the_cloud_output
tests/test_check.py::test_cli_demo_and_tiny_omni_pass
tests/test_check.py::test_qwen2_with_the_omni_tokenizer_against_the_demo_tokenizer
tests/test_versions.py::test_audio_only_processor_gets_stand_ins_only_where_transformers_reads_them"
RANGE_TESTS="${RANGE_TESTS:-$SEAMS}"
cd "$ROOT"
# downloads are kept beside the range virtualenvs: a new lock or release rebuilds a virtualenv
# from this cache instead of the network (CI's fresh clones share ~/.cache)
export PIP_CACHE_DIR="${PIP_CACHE_DIR:-${SPECSCOPE_CLOUD_VENV_ROOT:-$HOME/.cache/specscope}/pip-cache}"

if [ "${1:-}" = report ]; then
  shift
  rc=0
  for end in "$@"; do
    log="$ROOT/test-artifacts/range-$end.log" status="$ROOT/test-artifacts/range-$end.rc"
    waited=0
    while [ ! -f "$status" ] && [ "$waited" -lt "${RANGE_WAIT_S:-1800}" ]; do sleep 1; waited=$((waited + 1)); done
    if [ "$waited" -gt 0 ]; then echo "range: waited ${waited} s for the $end run"; fi
    cat "$log" 2>/dev/null || true
    if [ ! -f "$status" ]; then
      echo "range: the $end run did not finish within ${RANGE_WAIT_S:-1800} s ($log)" >&2; rc=1
    elif [ "$(cat "$status")" != 0 ]; then
      echo "range: the $end run failed (exit $(cat "$status"); $log)" >&2; rc=1
    fi
  done
  exit $rc
fi

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
if [ ! -x "$LOCKPY" ]; then
  echo "range: no test virtualenv at $LOCKPY (make install-test, or PIP=<its pip>)" >&2
  exit 2
fi
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
if [ -n "${RANGE_BUILD_ONLY:-}" ]; then exit 0; fi    # make test builds them beside the suite
xdist_args() {
  if "$VENV/bin/python" -c 'import xdist' 2>/dev/null; then echo "-n ${PYTEST_WORKERS:-2} --dist loadfile"; fi
}
t1=$SECONDS
set +e
# shellcheck disable=SC2086
# test_recorder_compiled.py (dynamo tracing the hooks: minutes of compiling on 2 cores) runs on
# the lock only; RANGE_SKIP= runs it here too (pytest's --ignore does not drop a file named
# on its command line, so the list is filtered here)
files=$(for f in $RANGE_TESTS; do [ "$f" = "${RANGE_SKIP-tests/test_recorder_compiled.py}" ] || echo "$f"; done)
echo "range: transformers $version ($want): $(echo "$files" | wc -l) test ids and files of \$RANGE_TESTS"
PYTHONPATH="$ROOT" "$VENV/bin/python" -m pytest -q -ra -p no:cacheprovider $(xdist_args) $files
rc=$?
echo "range: transformers $version: pytest exit $rc in $((SECONDS - t1)) s (venv ready in $((t1 - t0)) s)"
exit $rc
