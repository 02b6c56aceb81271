# Every target works from a fresh clone: it builds .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo fleet test lint bench local clean collector test-collector

# pip prints each package it collects and installs, so the first run (a few minutes) is never silent.
$(STAMP): pyproject.toml
	@echo "==> Creating $(VENV) and installing prime-otel with every extra and the dev tools (first run only)"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --progress-bar on -e '.[all,dev]'
	touch $(STAMP)
	@echo "==> $(VENV) is ready"

# Serves ./.prime-otel on port 8787, as `make local` does, so the links it prints open again later.
demo: $(STAMP)
	$(PY) examples/demo.py

# The Collector route on loopback: local platform, two gateways, the agent Collector, OTLP producers (docs/fleet.md).
fleet: $(STAMP) collector
	$(PY) examples/fleet.py

# The Collector is built before the tests, visibly, so its fleet tests run instead of building it unseen.
test: $(STAMP) lint test-collector
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check prime_otel tests benchmarks examples
	$(VENV)/bin/ruff format --check prime_otel tests benchmarks examples
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) -m benchmarks

# The OpenTelemetry Collector (official builder, components pinned in collector-config/manifest.yaml).
collector:
	bash collector-config/build.sh

# For the tests: the Collector when go is installed (a no-op when it is up to date), else say what is skipped.
test-collector:
	@if command -v go >/dev/null 2>&1; then \
		echo "==> Building the Collector for its tests (about 10 minutes the first time; a no-op when up to date)"; \
		bash collector-config/build.sh; \
	else \
		echo "==> go is not installed: the Collector tests will be skipped (install Go, or run .ci/run)"; \
	fi

local: $(STAMP)
	$(VENV)/bin/prime-otel local

clean:
	rm -rf $(VENV) .prime-otel test-artifacts prime-runs collector-config/dist
