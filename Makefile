# Two commands matter: `make demo` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export DAGSTER_HOME ?= $(CURDIR)/var/dagster-home
export NOTARIUS_DATA ?= $(CURDIR)/var/data
export NOTARIUS_INBOX ?= $(CURDIR)/var/inbox
SAMPLE := samples/crd3-c2e001-slice.jsonl

.PHONY: setup demo test test-fast ui lint schemas clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# llama.cpp builds from source (a few minutes the first time; pip caches the wheel).
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(PY) -m pip install --quiet -e '.[offline,dev]'
	touch $(STAMP)

setup: $(STAMP)
	mkdir -p $(DAGSTER_HOME) $(NOTARIUS_DATA) $(NOTARIUS_INBOX)
	test -f $(DAGSTER_HOME)/dagster.yaml || cp configs/dagster.yaml $(DAGSTER_HOME)/dagster.yaml

demo: setup
	$(VENV)/bin/notarius run $(SAMPLE) --config configs/offline.yaml --out $(NOTARIUS_DATA)/bundles

test: setup lint
	$(PY) -m pytest -q

test-fast: setup
	$(PY) -m pytest -q -m "not slow"

# `dg dev` reads the project from pyproject.toml ([tool.dg]); VIRTUAL_ENV tells it this venv is
# the project's (it warns otherwise).
ui: setup
	# dg dev on 127.0.0.1:3000, the bundles and reports served read-only on 127.0.0.1:3001
	VIRTUAL_ENV=$(CURDIR)/$(VENV) PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/notarius ui

lint: setup
	VIRTUAL_ENV=$(CURDIR)/$(VENV) PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/dg check defs
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	# strict on the engine, the lanes and the LLM layer
	$(VENV)/bin/mypy --strict notarius_dagster/engine notarius_dagster/dnd notarius_dagster/llm

schemas: setup
	$(PY) -m notarius_dagster.schemas --write

clean:
	rm -rf var
