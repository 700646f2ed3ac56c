# The two set-up commands of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test check unit integration bench stress eval real-council llama-server chromium \
	lock clean portable-test agent-server-up agent-server-down agent-server-test agent-server-bench

# Every dependency comes from requirements.lock, each file checked against its sha256 (pip
# refuses a file whose hash the lock does not list). llama-cpp-python is the exception: it is
# built here for this CPU (ops/llama-cpp-python/build-wheel.sh), so no published hash can name
# it; it is installed on its own, without dependencies (the lock holds them).
$(STAMP): pyproject.toml requirements.lock ops/llama-cpp-python/build-wheel.sh ops/native-cpu.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --require-hashes --no-deps -r requirements.lock
	$(BIN)/pip install --quiet --no-deps --force-reinstall \
		"$$(PYTHON=$(BIN)/python bash ops/llama-cpp-python/build-wheel.sh)"
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/pip check
	touch $(STAMP)

# Refresh requirements.lock after a change to pyproject.toml's dependencies (needs uv and PyPI):
# every package pinned with the sha256 of each of its published files.
lock:
	uv pip compile pyproject.toml ops/lock/build.in --extra test --generate-hashes \
		--no-emit-package llama-cpp-python --universal --python-version 3.11 \
		--custom-compile-command "make lock" -o requirements.lock

demo: $(STAMP)
	$(BIN)/collective ask "Which filament should I use for a part that sits in a hot car, and why?"

check: $(STAMP)
	$(BIN)/ruff check collective tests bench
	$(BIN)/ruff format --check collective tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo

# The real llama-server binary, built once and cached outside the repo (ops/llama-server/build.sh).
llama-server: $(STAMP)
	PYTHON=$(BIN)/python bash ops/llama-server/build.sh >/dev/null

# Debian's Chromium and chromedriver for the page's browser tests (tests/page), installed with
# apt once (as root, as CI runs); skipped where /usr/bin/chromium and chromedriver are there.
chromium:
	bash ops/chromium/install.sh

test: check llama-server chromium
	COLLECTIVE_LLAMA_SERVER="$$(PYTHON=$(BIN)/python bash ops/llama-server/build.sh)" \
		$(BIN)/pytest -q

# The tests that load a real model, once more on llama.cpp built for another CPU than this one
# (docs/portable-build.md): the wheel and llama-server for PORTABLE_CPU (x86-64-v3: AVX2, no
# -march=native, other kernels and float sums than the native build), each in its own cache,
# the wheel in a virtualenv of its own ahead of .venv. CI runs it after `make test`.
PORTABLE_CPU ?= x86-64-v3
PORTABLE_VENV := .portable/$(PORTABLE_CPU)
PORTABLE_TESTS ?= tests/unit/test_llama_cpp_runtime.py \
	tests/integration/test_backends_llamacpp.py tests/integration/test_backends_llama_server.py \
	tests/integration/test_tools_llama_server.py tests/integration/test_special_tokens.py \
	tests/integration/test_streaming_real.py tests/integration/test_backends_ollama.py \
	tests/integration/test_graph_real.py
portable-test: $(STAMP)
	COLLECTIVE_CPU=$(PORTABLE_CPU) PYTHON=$(BIN)/python bash ops/portable-venv.sh $(PORTABLE_VENV) >/dev/null
	COLLECTIVE_CPU=$(PORTABLE_CPU) COLLECTIVE_LLAMA_SERVER="$$(COLLECTIVE_CPU=$(PORTABLE_CPU) \
		PYTHON=$(BIN)/python bash ops/llama-server/build.sh)" \
		$(PORTABLE_VENV)/bin/python -m pytest -q $(PORTABLE_TESTS)

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

bench: $(STAMP)
	for b in bench/*.py; do case $$b in bench/council_eval.py|bench/agent_server.py|bench/stress.py) ;; \
		*) $(BIN)/python $$b || exit 1;; esac; done

# collective's llama-server paths under concurrent load, against the real server on 127.0.0.1:
# n_cmpl at -np 2 and -np 4 beside plain requests, a router loading and unloading two models,
# a replica killed mid-answer (bench/stress.py; figures in bench/README.md). A few minutes;
# exits non-zero on any choice interleaved or lost, overflow, crash or fault not named.
# Fewer rounds: make stress STRESS_ARGS="--rounds 1".
stress: llama-server
	COLLECTIVE_LLAMA_SERVER="$$(PYTHON=$(BIN)/python bash ops/llama-server/build.sh)" \
		$(BIN)/python bench/stress.py $(STRESS_ARGS)

# The real embedded council end to end (Qwen 0.5B members, 1.5B judge): 4-9 minutes.
real-council: $(STAMP)
	COLLECTIVE_REAL_COUNCIL=1 $(BIN)/pytest -q tests/integration/test_embedded_council.py

# Is the council worth it? `collective eval` on the bundled 113-question KB-grounded set (28 wide
# questions; tests/data/eval_questions.jsonl) with the embedded default at the evaluated windows
# (bench/eval.toml): arms single, self-consistency, self-moa, council, council-split. Rows go to
# bench/eval_rows.jsonl as each question finishes; run it again to continue (bench/README.md has
# the measured time). Other arms: make eval EVAL_ARGS="--arms single,council".
EVAL_KB := .collective/eval_kb.sqlite
eval: $(STAMP)
	$(BIN)/collective kb add tests/data/eval_kb --kb $(EVAL_KB) --no-expand >/dev/null
	$(BIN)/collective eval tests/data/eval_questions.jsonl --config bench/eval.toml \
		--kb $(EVAL_KB) --out bench/eval_rows.jsonl $(EVAL_ARGS)

# The council on a self-hosted Agent Server (README "Scaling out"): Aegra 0.11 in its own
# Python 3.12 environment (.agent-server/venv, ops/agent-server/setup.sh), two instances on one
# PostgreSQL and one Redis on 127.0.0.1, each process stopped by its pid.
AGENT_SERVER_PY = "$$(bash ops/agent-server/setup.sh)"

agent-server-up:
	$(AGENT_SERVER_PY) ops/agent-server/cluster.py start --instances 2

agent-server-down:
	$(AGENT_SERVER_PY) ops/agent-server/cluster.py stop

# Two instances driven with langgraph_sdk (streams, join, a killed instance, cancel, memory):
# about 5 minutes here, plus about 2 for a fresh server environment.
agent-server-test: $(STAMP)
	COLLECTIVE_AGENT_SERVER_PYTHON=$(AGENT_SERVER_PY) $(BIN)/pytest -q tests/agent_server

# Runs completed with one instance killed, and the server path's added latency (bench/README.md).
agent-server-bench: $(STAMP)
	COLLECTIVE_AGENT_SERVER_PYTHON=$(AGENT_SERVER_PY) $(BIN)/python bench/agent_server.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .portable .agent-server .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
