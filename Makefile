.PHONY: help install install-tests demo test unit integration lint bench
PY ?= python3
# Three pytest workers (pytest-xdist) on two cores: the longest tests spend most of
# their time waiting on schedules (a merge every second, a capture child restarted, a
# wall-clock run of a crash loop), so a third worker fills the cores meanwhile. The
# tests of one shared server stay in one worker (tests/integration/conftest.py
# SHARED_SERVERS).
PYTEST_WORKERS ?= -n 2 --dist loadgroup

help:  ## list the targets
	@grep -E '^[a-z]+:.*## ' Makefile | sed 's/:.*## /\t/'

install:  ## install Debian and Python dependencies (skips what is present)
	@bash scripts/install.sh

install-tests:  ## install as above, plus what only the tests use (the schema registry)
	@bash scripts/install.sh --tests

demo: install  ## capture a live private MariaDB into Iceberg and verify the mirror
	icetide demo

test: install-tests  ## lint, type-check and run every test (unit + integration)
	$(PY) -m ruff check icetide tests bench
	$(PY) -m mypy
	$(PY) -m pytest -q $(PYTEST_WORKERS) --durations=25

unit: install-tests  ## tests that need no JVM
	$(PY) -m pytest -q -m "not integration"

integration: install-tests  ## tests with real Spark, Iceberg and databases
	$(PY) -m pytest -q -m integration $(PYTEST_WORKERS)

lint:  ## ruff and mypy
	$(PY) -m ruff check icetide tests bench
	$(PY) -m ruff format --check icetide tests bench
	$(PY) -m mypy

bench: install  ## merge benchmark (prints ratios against the naive MERGE)
	$(PY) bench/merge_bench.py
