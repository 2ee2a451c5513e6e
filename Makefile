# Two commands do everything on a fresh machine: `make run` and `make test`.
VENV   := .venv
PY     := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: setup test test-fast lint typecheck run run-secure bench chaos clean down

setup:
	@scripts/setup.sh

lint: setup
	$(VENV)/bin/ruff check .

# mypy over every product package (settings in pyproject.toml's [tool.mypy]).
typecheck: setup
	$(VENV)/bin/mypy

# The whole suite, independent tests in parallel (pytest-xdist): each worker takes a whole
# test module at a time, longest first (tests/conftest.py). Real-process tests mostly
# wait, so there are more workers than cores.
TEST_WORKERS ?= 4
test: setup lint typecheck
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope $(PYTEST_ARGS)

# The inner loop: unit and simulation tests, no ZooKeeper or server processes.
test-fast: setup lint typecheck
	$(PY) -m pytest -n 2 --dist loadscope -m "not integration" tests/unit tests/sim $(PYTEST_ARGS)

run: setup
	@if [ -n "$(SECURE)" ]; then scripts/demo_secure.sh; else scripts/demo.sh; fi

# `make run`'s demo on a cluster whose every listener is SASL_SSL (./.tributary-secure):
# a user alice with ACLs produces and consumes; also `make run SECURE=1`.
run-secure: setup
	@scripts/demo_secure.sh

bench: setup
	$(PY) -m tests.bench $(BENCH_ARGS)

# The chaos suite in its long seeded form (`make test` runs the short one): Kafka's
# replication matrix, disk faults, the planted bug, and CHAOS_MINUTES of seeded random
# faults. The seed is printed in the summary table; pass it back to replay a run.
CHAOS_SEED    ?= $(shell date +%s)
CHAOS_MINUTES ?= 10
chaos: setup
	CHAOS_SEED=$(CHAOS_SEED) CHAOS_MINUTES=$(CHAOS_MINUTES) $(PY) -m pytest tests/chaos -v $(PYTEST_ARGS)

down:
	@if [ -x $(VENV)/bin/tributary ]; then $(VENV)/bin/tributary cluster down; fi
	@if [ -x $(VENV)/bin/tributary ] && [ -d .tributary-secure ]; then \
	  $(VENV)/bin/tributary cluster --dir .tributary-secure down; fi

clean: down
	rm -rf $(VENV) .pytest_cache .hypothesis .ruff_cache *.egg-info .tributary .tributary-secure
