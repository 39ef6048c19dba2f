# Two commands on a fresh machine: `make serve` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
SERVER := $(VENV)/.server-stamp

.PHONY: serve test lint typecheck unit guard deps services bench resilience clean

# `make test`: the gateway, its extras and the dev tools
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar on -e '.[dev]'
	touch $(STAMP) $(SERVER)

# `make serve`: the gateway only (pip shows its progress: a newcomer sees it work)
$(SERVER): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing the gateway into $(VENV) (pip install -e '.[server]')"
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar on -e '.[server]'
	touch $(SERVER)

serve: $(SERVER)
	$(BIN)/sluice serve $(ARGS)

test: $(STAMP) deps services lint typecheck unit guard

lint: $(STAMP)
	$(BIN)/ruff check sluice tests bench
	$(BIN)/ruff format --check sluice tests bench
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy

# The tests in $(JOBS) processes, then the measured ones (`alone`) with the machine to
# themselves. The gateway is compiled first: the tests start it as a process hundreds
# of times, and PYTHONDONTWRITEBYTECODE would have each start compile it again.
JOBS ?= 2
unit: $(STAMP)
	$(BIN)/python -m compileall -q sluice bench
	$(BIN)/pytest -n $(JOBS) -m "not alone" $(PYTEST_ARGS)
	$(BIN)/pytest -m alone $(PYTEST_ARGS) || test $$? -eq 5

# Instructions per metered streamed request against bench/cpu_baseline.json (+10 % fails)
guard: $(STAMP) deps
	$(BIN)/python -m bench.cpu_guard

# What the tests need beyond the venv (nginx, node, tests/node's npm packages), installed when missing
deps:
	@./scripts/deps.sh

services:
	@./scripts/services.sh

# Sluice's figures; the peers table only where the peer kit (../shared/bench) is present
bench: $(STAMP)
	bench/bench.sh

# The resilience suite at full counts (several minutes); `make test` runs its fast tier.
resilience: $(STAMP) services
	$(BIN)/python -m bench.resilience --tier full --write bench/RESILIENCE.md

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
