# The two set-up commands of the README: `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test docs bench clean

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
