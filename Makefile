# The two commands of the README, plus their parts.
VENV ?= .venv
GATE := $(VENV)/bin/gate
PYTEST := $(VENV)/bin/pytest

.PHONY: demo test install unit e2e lint bench clean

demo: install  ## set up, then run the default cpu-smoke plan against a real vllm serve
	$(GATE) run --out gate-out

test: install  ## set up, then lint and run the whole test suite (unit + real vllm serve)
	bash scripts/ci_lint.sh
	$(PYTEST) -v --timeout=1200 --durations=15 tests

install:
	GATE_VENV=$(VENV) bash scripts/install.sh

unit: install
	$(PYTEST) -q -m "not vllm" tests

e2e: install
	$(PYTEST) -v -m vllm tests

lint: install
	bash scripts/ci_lint.sh

bench: install
	$(VENV)/bin/python benchmarks/client_overhead.py
	$(VENV)/bin/python benchmarks/cross_check.py
	$(VENV)/bin/python benchmarks/noise_simulation.py

clean:
	rm -rf gate-out gate-ab .pytest_cache
