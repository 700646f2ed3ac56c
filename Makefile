# The two set-up commands of the README: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test check unit integration bench eval real-council llama-server clean

$(STAMP): pyproject.toml ops/llama-cpp-python/build-wheel.sh ops/native-cpu.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet --force-reinstall \
		"$$(PYTHON=$(BIN)/python bash ops/llama-cpp-python/build-wheel.sh)"
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

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

test: check llama-server
	COLLECTIVE_LLAMA_SERVER="$$(PYTHON=$(BIN)/python bash ops/llama-server/build.sh)" \
		$(BIN)/pytest -q

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

bench: $(STAMP)
	for b in bench/*.py; do [ $$b = bench/council_eval.py ] || $(BIN)/python $$b || exit 1; done

# The real embedded council end to end (Qwen 0.5B members, 1.5B judge): 4-9 minutes.
real-council: $(STAMP)
	COLLECTIVE_REAL_COUNCIL=1 $(BIN)/pytest -q tests/integration/test_embedded_council.py

# Council vs one model on the 113-question KB-grounded QA set (28 wide questions), arms single,
# self-consistency, self-moa, council, council-split (bench/README.md has the measured time).
# A subset: make eval EVAL_ARGS="--questions 12"; only the wide ones: EVAL_ARGS="--kinds wide".
eval: $(STAMP)
	$(BIN)/python bench/council_eval.py --out bench/council_eval.json $(EVAL_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache
