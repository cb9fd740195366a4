#!/usr/bin/env bash
# llama.cpp's llama-server as the second audited engine (issue 57, docs/audit.md).
#   scripts/cloud/llama.sh build      build (once per machine) llama-server + the converter's venv
#   scripts/cloud/llama.sh convert    convert the demo pair (HF folders) to GGUF, print the folder
#   scripts/cloud/llama.sh serve      serve the demo cloud with the demo edge as its draft (-md)
# The source is the llama.cpp tree vendored in the llama-cpp-python sdist (pinned below; a local
# copy is used when LLAMA_SDIST names one). Everything lives in
# ${SPECSCOPE_CLOUD_VENV_ROOT:-~/.cache/specscope}/llama-<hash> (flock'd, a .ready marker), the
# hash of this pin, the build flags and the compiler, so every clone on the machine builds it once.
# Env: CLOUD_PORT (8000), CLOUD_HOST (127.0.0.1), CLOUD_THREADS (1), CLOUD_MODEL (HF folder, the
#      demo cloud), SPEC_DRAFT (HF folder of the draft, the demo edge; "none" serves no draft),
#      LLAMA_DRAFT_MAX (4, tokens drafted per step), LLAMA_EXTRA_ARGS (appended).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY="${PY:-python3}"

LLAMA_CPP_PYTHON=0.3.36                    # the sdist whose vendor/llama.cpp is built
TORCH="torch==2.13.0+cpu"                  # the converter imports torch (the CPU build vLLM pins)
CONVERT_PINS="numpy==2.3.5 sentencepiece==0.2.3 safetensors==0.8.0 transformers==5.19.0"
CMAKE_FLAGS="-DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DBUILD_SHARED_LIBS=OFF"
HASH="$( (echo "$LLAMA_CPP_PYTHON $TORCH $CONVERT_PINS $CMAKE_FLAGS"; gcc --version | head -1; "$PY" -c 'import sys; print(sys.version_info[:2])') | sha256sum | cut -c1-12)"
VROOT="${SPECSCOPE_CLOUD_VENV_ROOT:-$HOME/.cache/specscope}"
DIR="$VROOT/llama-$HASH"
SERVER="$DIR/bin/llama-server"

build() {
  [ -f "$DIR/.ready" ] && return 0
  mkdir -p "$VROOT"
  exec 9>"$DIR.lock"
  flock 9                                  # one builder at a time (make cloud-llama, tests, CI)
  [ -f "$DIR/.ready" ] && return 0
  local t0=$SECONDS tmp="$DIR.building"
  # Each step below skips what an interrupted earlier build already finished in $tmp.
  echo "llama: building $DIR (llama.cpp from llama-cpp-python $LLAMA_CPP_PYTHON; up to an hour on 2 busy cores, once)" >&2
  mkdir -p "$tmp/bin"
  if [ ! -f "$tmp/src/convert_hf_to_gguf.py" ]; then
    local sdist="${LLAMA_SDIST:-}"
    if [ -z "$sdist" ]; then
      # --no-binary for this package only: with `:all:` pip also built every build dependency
      # of the sdist from source to read its metadata (hatchling, flit, setuptools, ... one
      # isolated build each): 270+ CPU s, at nice 0, beside a test suite; now ~5 s
      "$PY" -m pip download -q --no-deps --no-binary "llama-cpp-python" -d "$tmp/dl" "llama-cpp-python==$LLAMA_CPP_PYTHON" >&2
      sdist="$(ls "$tmp"/dl/llama_cpp_python-*.tar.gz)"
    fi
    rm -rf "$tmp/src" "$tmp/x"; mkdir -p "$tmp/x"
    tar -xzf "$sdist" -C "$tmp/x"
    mv "$tmp/x/llama_cpp_python-$LLAMA_CPP_PYTHON/vendor/llama.cpp" "$tmp/src"
    rm -rf "$tmp/x" "$tmp/dl"
  fi
  if [ ! -x "$tmp/bin/llama-server" ]; then
    # shellcheck disable=SC2086
    cmake -S "$tmp/src" -B "$tmp/build" -G Ninja $CMAKE_FLAGS >&2
    # nice 19: beside a test suite (make test builds it in the background) it takes only idle CPU
    nice -n 19 cmake --build "$tmp/build" --target llama-server -j "${LLAMA_JOBS:-2}" >&2
    cp "$tmp/build/bin/llama-server" "$tmp/bin/"
    rm -rf "$tmp/build"
  fi
  if [ ! -f "$tmp/venv/.ok" ]; then
    # The converter's own small virtualenv; the CPU torch first, as for the vLLM one.
    rm -rf "$tmp/venv"; "$PY" -m venv "$tmp/venv"
    "$tmp/venv/bin/pip" install -q "$TORCH" >&2
    "$tmp/venv/bin/pip" install -q $CONVERT_PINS "$tmp/src/gguf-py" -c <(echo "$TORCH") >&2
    touch "$tmp/venv/.ok"
  fi
  "$tmp/bin/llama-server" --version >&2 || true
  # venv scripts carry absolute shebangs: fix them for the final path.
  mv "$tmp" "$DIR"
  grep -rlI --null "$tmp" "$DIR/venv/bin" | xargs -0 -r sed -i "s#$tmp#$DIR#g"
  echo "llama: built in $((SECONDS - t0)) s" >&2
  touch "$DIR/.ready"
}

# gguf PATH_OF_HF_FOLDER: convert once (f32, like the HF weights) into $DIR/gguf/<name>-<hash>.gguf.
gguf() {
  local src="$1" h out
  h="$(cat "$src"/*.json "$src"/*.safetensors | sha256sum | cut -c1-12)"
  out="$DIR/gguf/$(basename "$src")-$h.gguf"
  if [ ! -f "$out" ]; then
    mkdir -p "$DIR/gguf"
    # The demo tokenizer is Qwen2's BPE (the same pre-tokenizer regex) with its own vocabulary,
    # which the converter's table of known tokenizer hashes cannot know: name it qwen2 when the
    # regex is Qwen2's, else the converter's own refusal stands.
    "$DIR/venv/bin/python" - "$DIR/src" "$src" --outtype f32 --outfile "$out.tmp" >&2 <<'PY'
import json, runpy, sys
src = sys.argv[1]
sys.path[:0] = [src, src + "/gguf-py"]
from conversion.base import TextModel
QWEN2 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
known = TextModel.get_vocab_base_pre
def pre(self, tokenizer):
    try:
        return known(self, tokenizer)
    except NotImplementedError:
        tok = json.loads((self.dir_model / "tokenizer.json").read_text(encoding="utf-8"))
        if QWEN2 in [p.get("pattern", {}).get("Regex") for p in (tok.get("pre_tokenizer") or {}).get("pretokenizers", [])]:
            return "qwen2"
        raise
TextModel.get_vocab_base_pre = pre
sys.argv = [src + "/convert_hf_to_gguf.py", *sys.argv[2:]]
runpy.run_path(sys.argv[0], run_name="__main__")
PY
    mv "$out.tmp" "$out"
  fi
  echo "$out"
}

cmd="${1:-serve}"; shift || true
CLOUD="${CLOUD_MODEL:-$ROOT/specdec_core/demo/models/cloud}"
DRAFT="${SPEC_DRAFT:-$ROOT/specdec_core/demo/models/edge}"
case "$cmd" in
  ready) [ -f "$DIR/.ready" ] ;;           # built already? (the tests order their files by it)
  build)
    build
    echo "$SERVER" ;;
  convert)
    build
    gguf "$CLOUD"
    [ "$DRAFT" = none ] || gguf "$DRAFT" ;;
  serve)
    build
    M="$(gguf "$CLOUD")"
    SPEC_ARGS=()
    if [ "$DRAFT" != none ]; then
      SPEC_ARGS=(-md "$(gguf "$DRAFT")" --spec-type draft-simple --spec-draft-n-max "${LLAMA_DRAFT_MAX:-4}" --spec-draft-n-min 0 --spec-draft-p-min 0)
    fi
    # shellcheck disable=SC2086
    exec "$SERVER" -m "$M" "${SPEC_ARGS[@]}" --host "${CLOUD_HOST:-127.0.0.1}" \
      --port "${CLOUD_PORT:-8000}" -t "${CLOUD_THREADS:-1}" -c 512 -np 1 --no-webui \
      ${LLAMA_EXTRA_ARGS:-} ;;
  *) echo "usage: $0 ready | build | convert | serve" >&2; exit 2 ;;
esac
