# planact — two commands: `make run` and `make test`.
SHELL := /bin/bash
UV ?= $(shell command -v uv 2>/dev/null || echo $(HOME)/.local/bin/uv)
export LITELLM_LOCAL_MODEL_COST_MAP := True

# Fragments (mk/*.mk) add their own targets and append to these.
RUN_PREREQS :=
TEST_PREREQS :=

.PHONY: run test setup lint typecheck pytest bench clean
.DEFAULT_GOAL := run

-include mk/*.mk

setup: .venv/.synced

$(UV):
	@command -v uv >/dev/null 2>&1 || python3 -m pip install --user --quiet uv || python3 -m pip install --quiet uv

.venv/.synced: pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen --compile-bytecode
	@touch $@

run: setup $(RUN_PREREQS)
	$(UV) run planact serve

lint: setup
	$(UV) run ruff check backend tests bench
	$(UV) run ruff format --check backend tests bench

typecheck: setup
	$(UV) run mypy

pytest: setup $(TEST_PREREQS)
	$(UV) run pytest $(PYTEST_ARGS)

# pytest last: its summary line closes the output
test: lint typecheck $(EXTRA_TESTS) pytest

bench: setup
	$(UV) run python -m bench

clean:
	rm -rf .venv .pytest_cache .mypy_cache .ruff_cache frontend/dist frontend/node_modules
