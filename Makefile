# Set-up and checks in one place. `make demo` and `make test` each create the virtual
# environment (.venv) and install the project into it first, so both work on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# constraints-cpu.txt pins torch to the CPU build so extras never pull a multi-GB CUDA build.
PIP_INSTALL := $(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints-cpu.txt

.PHONY: setup demo test lint typecheck unit bench

setup:
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(PIP_INSTALL) -e '.[dev]'

demo: setup
	$(BIN)/tsmg demo

lint: setup
	$(BIN)/ruff check .

typecheck: setup
	$(BIN)/mypy

unit: setup
	$(BIN)/pytest

test: lint typecheck unit

bench: setup
	$(BIN)/python bench/env_speed.py
