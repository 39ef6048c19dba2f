# Two commands on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: serve test lint typecheck unit deps services bench resilience clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $(STAMP)

serve: $(STAMP)
	$(BIN)/sluice serve $(ARGS)

test: $(STAMP) deps services lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check sluice tests bench
	$(BIN)/ruff format --check sluice tests bench
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest $(PYTEST_ARGS)

# What the tests need beyond the venv (nginx, node, tests/node's npm packages), installed when missing
deps:
	@./scripts/deps.sh

services:
	@./scripts/services.sh

bench: $(STAMP)
	bench/peers.sh

# The resilience suite at full counts (several minutes); `make test` runs its fast tier.
resilience: $(STAMP) services
	$(BIN)/python -m bench.resilience --tier full --write bench/RESILIENCE.md

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
