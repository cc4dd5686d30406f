# The README's two commands: `make demo` and `make test`. Each sets up .venv on its own.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test bench bench-full schemas clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/topoplace demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python -m bench.run --profile short

bench-full: $(STAMP)
	$(BIN)/python -m bench.run --profile full

schemas: $(STAMP)
	$(BIN)/topoplace schemas generate

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache demo-report.json demo-traces.jsonl
