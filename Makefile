# Two commands on a fresh machine with Python 3.11: `make run` and `make test`.
# Each creates the virtual environment (.venv) and installs the project first.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
OUT ?= out

.PHONY: run test lint bench sample screenshots docs serve-docs clean

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

bench: $(BIN)/.installed  ## planning speed: writes benchmarks/results/planning.json
	$(BIN)/python benchmarks/bench.py

screenshots: $(BIN)/.installed  ## the README's report pictures (needs soffice, pdftoppm, chromium)
	$(BIN)/python -m planner.reports.screenshots --out docs/images

docs: $(BIN)/.installed  ## the docs site, built into ./site (strict: a broken link fails)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

serve-docs: $(BIN)/.installed  ## the docs site on http://127.0.0.1:8000, rebuilt on every edit
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8000

sample: $(BIN)/.installed  ## regenerate the bundled sample
	$(BIN)/python data/generate.py --out data/sample

clean:
	rm -rf $(VENV) $(OUT) site .pytest_cache .ruff_cache
