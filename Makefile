# The two set-up commands of the README: `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test test-nojit docs bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@ $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/thrifty demo

test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -q

# The numba kernels run as plain Python (as pygbm's CI does), so their Python semantics are tested
# and covered too: the runtime's interpreter and lazy loop, Forest prediction and JSON round trips,
# QWYC's and Fan's kernels, BudgetPrune's minimum cut, BudgetRF's and ADAPT's tree growers. The
# files are chosen to take about a minute of CPU; compiled plans are native code, not numba kernels.
NOJIT_TESTS := tests/runtime/test_evaluate.py tests/runtime/test_lazy.py tests/runtime/test_async_eval.py \
	tests/forest/test_io.py tests/order/test_qwyc.py tests/order/test_qwyc_multiclass.py tests/order/test_fan.py \
	tests/prune/test_budgetprune.py tests/train/test_budgetrf.py tests/train/test_adapt_trees.py
test-nojit: $(VENV)/.installed-test
	NUMBA_DISABLE_JIT=1 $(BIN)/python -m pytest -q -p no:cacheprovider $(NOJIT_TESTS)
# The documentation site (docs/_build/html/index.html), warnings as errors. The test extra
# holds the docs extra, and the modules every API page imports.
docs: $(VENV)/.installed-test
	$(BIN)/python -m sphinx -b html -W --keep-going -q docs docs/_build/html

# Every benchmark in its --quick form, then the results page from what they wrote.
bench: $(VENV)/.installed-test
	for script in $(filter-out benchmarks/report.py benchmarks/_%,$(wildcard benchmarks/*.py)); do \
		$(BIN)/python $$script --quick || exit 1; done
	$(BIN)/python benchmarks/report.py

clean:
	rm -rf $(VENV) thrifty-demo docs/_build docs/api
