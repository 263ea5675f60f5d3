# Every target creates or reuses .venv, so a fresh clone needs nothing else.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-quick check bench setup clean mutate

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# The distribution was called keel before it was keel-guard: a .venv made then still holds it.
	$(BIN)/python -m pip uninstall -q -y keel 2>/dev/null || true
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

# The fast part of the suite: no test marked slow, no real agent client, no embedded model.
test-quick: $(STAMP)
	$(BIN)/python -m pytest -n 2 -q -m 'not slow and not clients and not local_model' $(PYTEST_ARGS)

check: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench
	$(BIN)/pyright
	$(BIN)/lint-imports

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

# Mutation testing of the safety-critical modules ([tool.mutmut] in pyproject.toml); not part
# of `make test` or CI. mutmut resumes an interrupted run; `rm -rf mutants` starts afresh.
# keel's tests run keel in subprocesses: PYTHONPATH gives them the mutated code (and mutmut,
# which it imports, even under `python -S`); scripts/mutmut_keel.py hands them the mutant.
MUTANTS_PATH = $(CURDIR)/mutants/src:$(CURDIR)/scripts:$(shell $(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null)
mutate: $(STAMP)
	mkdir -p mutants/src
	# mutmut copies tests/ following symlinks, and fails copying onto a link it made before:
	# start from no copy; scripts/mutmut_keel.py puts the links back (the patch corpus has some).
	rm -rf mutants/tests
	date +%s > mutants/started
	# Every keel subprocess imports the (large) mutated modules: let it cache their bytecode.
	env -u PYTHONDONTWRITEBYTECODE PYTHONPATH=$(MUTANTS_PATH) $(BIN)/python scripts/mutmut_run.py run --max-children $${MUTATE_JOBS:-2} > mutants/run.log 2>&1 \
		|| { tail -n 40 mutants/run.log; exit 1; }
	tr '\r' '\n' < mutants/run.log | grep -E 'mutations/second|done in' || true
	@cat mutants/phases.log 2>/dev/null || true
	@echo "mutmut took $$(( $$(date +%s) - $$(cat mutants/started) )) s"
	$(BIN)/python scripts/mutation_score.py --survivors mutants/survivors.txt \
		--report tests/MUTATION.md --explained tests/mutation-equivalent.tsv \
		--killers tests/mutation-killers.tsv

clean:
	rm -rf $(VENV) .pytest_cache build dist
