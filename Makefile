# Two commands on a fresh machine with Python 3.11: `make run` and `make test`.
# Each creates the virtual environment (.venv) and installs the project first.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
OUT ?= out

.PHONY: run test lint bench sample screenshots clean

$(BIN)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test,sweep,solvers]'
	touch $@

run: $(BIN)/.installed  ## plan the bundled sample into ./out
	$(BIN)/planner run data/sample --out $(OUT)

lint: $(BIN)/.installed
	$(BIN)/ruff check planner tests data benchmarks

test: $(BIN)/.installed lint  ## the whole test suite
	$(BIN)/pytest

bench: $(BIN)/.installed  ## the benchmark behind the README's figures
	$(BIN)/python benchmarks/bench.py

screenshots: $(BIN)/.installed  ## the README's report pictures (needs soffice, pdftoppm, chromium)
	$(BIN)/python -m planner.reports.screenshots --out docs

sample: $(BIN)/.installed  ## regenerate the bundled sample
	$(BIN)/python data/generate.py --out data/sample

clean:
	rm -rf $(VENV) $(OUT) .pytest_cache .ruff_cache
