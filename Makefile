# Two commands do everything on a fresh machine: `make run` and `make test`.
VENV   := .venv
PY     := $(VENV)/bin/python
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: setup test lint run bench clean down

setup:
	@scripts/setup.sh

lint: setup
	$(VENV)/bin/ruff check .

test: setup lint
	$(PY) -m pytest $(PYTEST_ARGS)

run: setup
	@scripts/demo.sh

bench: setup
	$(PY) -m tests.bench $(BENCH_ARGS)

down:
	@if [ -x $(VENV)/bin/tributary ]; then $(VENV)/bin/tributary cluster down; fi

clean: down
	rm -rf $(VENV) .pytest_cache .hypothesis .ruff_cache *.egg-info .tributary
