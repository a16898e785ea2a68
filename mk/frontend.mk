# Web UI (frontend/): Vue 3 + Vite. Built into frontend/dist, which the backend serves at /.
NPM ?= npm
FRONTEND_SRC := $(shell find frontend/src frontend/public -type f 2>/dev/null)
FRONTEND_CONF := frontend/package.json frontend/package-lock.json frontend/index.html \
	frontend/vite.config.ts frontend/tsconfig.json

.PHONY: frontend frontend-test frontend-dev

# npm ci only when the lock file changed (or node_modules is missing)
frontend/node_modules/.package-lock.json: frontend/package.json frontend/package-lock.json
	@echo "== frontend packages (npm ci)"
	@cd frontend && $(NPM) ci --no-audit --no-fund --loglevel=error
	@touch $@

# rebuild only when sources or package files changed
frontend/dist/index.html: $(FRONTEND_SRC) $(FRONTEND_CONF) frontend/node_modules/.package-lock.json
	@echo "== web UI (vite build)"
	@cd frontend && $(NPM) run --silent build -- --logLevel warn
	@touch $@

frontend: frontend/dist/index.html

frontend-test: frontend/node_modules/.package-lock.json
	cd frontend && npx vitest run

# vite dev server on :5173, proxying /api to the backend on 127.0.0.1:8000
frontend-dev: frontend/node_modules/.package-lock.json
	cd frontend && $(NPM) run dev

RUN_PREREQS += frontend/dist/index.html
TEST_PREREQS += frontend/dist/index.html
EXTRA_TESTS += frontend-test
