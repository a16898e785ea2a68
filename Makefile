# planact — two commands: `make run` and `make test`.
SHELL := /bin/bash
UV ?= $(shell command -v uv 2>/dev/null || echo $(HOME)/.local/bin/uv)
export LITELLM_LOCAL_MODEL_COST_MAP := True

# Fragments (mk/*.mk) add their own targets and append to these.
RUN_PREREQS :=
TEST_PREREQS :=

.PHONY: run test setup bytecode lint typecheck pytest bench clean
.DEFAULT_GOAL := run

-include mk/*.mk

# setup: the server's packages and the dev tools (tests, lint); `make run` needs only the first
setup: .venv/.synced-dev

$(UV):
	@command -v uv >/dev/null 2>&1 || python3 -m pip install --user --quiet uv || python3 -m pip install --quiet uv

# --inexact: a `make run` after `make test` keeps the dev tools
.venv/.synced: pyproject.toml uv.lock | $(UV)
	@echo "== Python packages for the server (uv sync)"
	@$(UV) sync --frozen --no-dev --inexact --quiet
	@touch $@

# --compile-bytecode (every package, ~15 s once): where PYTHONDONTWRITEBYTECODE is set (CI
# images often set it) every process the suite starts compiled what it imported, each time
# (docs/figures.md); `make run` skips it (a first start writes its own bytecode elsewhere)
.venv/.synced-dev: .venv/.synced
	@echo "== Python dev tools (uv sync --dev)"
	@$(UV) sync --frozen --quiet --compile-bytecode
	@touch $@

# the project's own bytecode, brought up to date (only changed files are compiled again):
# the suite starts hundreds of servers, workers and CLIs
bytecode: .venv/.synced
	@.venv/bin/python -m compileall -q -j 0 backend tests bench

# .venv/bin/planact, not `uv run`: uv may not be on PATH, and `uv run` would add the dev tools
run: .venv/.synced $(RUN_PREREQS)
	@command -v uv >/dev/null 2>&1 || echo "== uv is in ~/.local/bin, not on PATH: in a new shell, run .venv/bin/planact (see README)"
	@.venv/bin/planact serve

lint: setup
	$(UV) run ruff check backend tests bench
	$(UV) run ruff format --check backend tests bench

typecheck: setup
	$(UV) run mypy

# coverage of backend/ in the pytest process and in every Python process it starts
# (`planact serve`, workers, the CLI: pyproject's [tool.coverage.run] patch = subprocess,
# sigterm = true, since uvicorn ends on the SIGTERM it caught); the floor sits under the
# whole suite's figure (docs/figures.md)
COVERAGE_FLOOR ?= 91
# the slowest tests are listed before the summary: where the suite's time goes
pytest: setup bytecode $(TEST_PREREQS)
	$(UV) run pytest --cov --cov-report= --cov-fail-under=$(COVERAGE_FLOOR) --durations=15 \
		$(PYTEST_ARGS)

# pytest last: its summary line closes the output
test: lint typecheck $(EXTRA_TESTS) pytest

bench: setup
	$(UV) run python -m bench

clean:
	rm -rf .venv .pytest_cache .mypy_cache .ruff_cache frontend/dist frontend/node_modules
