# The two commands of the README, plus their parts.
VENV ?= .venv
GATE := $(VENV)/bin/gate
PYTEST := $(VENV)/bin/pytest
PYTEST_OPTS := --timeout=1200 --durations=15
# The integration tests are independent (each its own folders, git repositories, ports and
# fake GitHub) and mostly wait on subprocesses: one worker per core halves their time. Each
# module runs on one worker (loadscope), so that a module's costly fixture (a bisect, an A/B,
# a corpus build) runs once, not once per worker. The end-to-end tests stay serial: each real
# vLLM server wants the whole machine.
PARALLEL := -n auto --dist loadscope

.PHONY: demo test install unit integration e2e lint bench clean

demo: install  ## set up, then run the default cpu-smoke plan against a real vllm serve
	$(GATE) run --out gate-out

# The lint runs beside the unit tests (one process each, on two cores); its output is printed
# once they are done, and either failing stops the target.
test: install  ## set up, then lint and run the unit, integration and end-to-end tests
	lint_log=$$(mktemp); bash scripts/ci_lint.sh > "$$lint_log" 2>&1 & lint=$$!; \
	$(PYTEST) -v $(PYTEST_OPTS) tests/unit; unit=$$?; \
	wait $$lint; lint=$$?; cat "$$lint_log"; rm -f "$$lint_log"; \
	echo "lint: exit $$lint; unit: exit $$unit"; [ $$lint -eq 0 ] && [ $$unit -eq 0 ]
	$(PYTEST) -v $(PYTEST_OPTS) $(PARALLEL) tests/integration
	$(PYTEST) -v $(PYTEST_OPTS) tests/e2e

install:
	GATE_VENV=$(VENV) bash scripts/install.sh

unit: install  ## pure tests, no subprocess, socket or git (seconds)
	$(PYTEST) -q $(PYTEST_OPTS) tests/unit

integration: install  ## real git repositories, the local GitHub server, subprocesses, linters
	$(PYTEST) -q $(PYTEST_OPTS) $(PARALLEL) tests/integration

e2e: install  ## against a real vllm serve on CPU (marked vllm)
	$(PYTEST) -v $(PYTEST_OPTS) tests/e2e

lint: install
	bash scripts/ci_lint.sh

bench: install
	$(VENV)/bin/python benchmarks/client_overhead.py
	$(VENV)/bin/python benchmarks/cross_check.py
	$(VENV)/bin/python benchmarks/noise_simulation.py

clean:
	rm -rf gate-out gate-ab .pytest_cache
