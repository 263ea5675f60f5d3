# Every target creates or reuses .venv, so a fresh clone needs nothing else.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test check bench setup clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	# keel never needs setuptools (hatchling builds in isolation), and its distutils .pth
	# costs every keel process ~0.4 ms of the hook and policy-check budgets.
	$(BIN)/python -m pip uninstall -q -y setuptools 2>/dev/null || true
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/keel demo

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q $(PYTEST_ARGS)

check: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/pyright

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache build dist
