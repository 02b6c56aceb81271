# Every target works from a fresh clone: it builds .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench local clean collector

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[all,dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

test: $(STAMP) lint
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

local: $(STAMP)
	$(VENV)/bin/prime-otel local

clean:
	rm -rf $(VENV) .prime-otel test-artifacts prime-runs collector-config/dist
