# The README's two commands: `make demo` and `make test`. Each sets up .venv on its own.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test bench bench-full schemas chaos fuzz clean

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

# 2,000+ pods, two placers and two binders, each process fault four times (24 kills, 4 empty-broker
# restarts), 12 % API faults; writes chaos-report.json.
chaos: $(STAMP)
	$(BIN)/python -m topoplace.dev.chaos --pods 2000 --gangs 20 --rounds 4 --api-fault-rate 0.12 --converge-timeout 600 --report chaos-report.json

# The fuzz tests' long profile: at least 100,000 examples per decoder and for the engine's requests.
fuzz: $(STAMP)
	TOPOPLACE_FUZZ_PROFILE=long $(BIN)/python -m pytest -q tests/fuzz

schemas: $(STAMP)
	$(BIN)/topoplace schemas generate

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache demo-report.json demo-traces.jsonl chaos-report.json .chaos
