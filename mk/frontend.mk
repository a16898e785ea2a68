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

# The message model's TypeScript types are generated from the Python model: its JSON Schema
# (backend/messages/schema.py) with the kinds and action names of the action registry
# (backend/actions/registry/wire.py) and what each kind carries in meta.json (the payload
# models: backend/messages/payloads.py, each action's ActionDef.payload), then
# json-schema-to-typescript (scripts/gen-types.mjs). The schema is made afresh into a
# temporary file for each generator, never committed: message.gen.ts carries it too
# (messageSchema, what the UI draws a generic card from). The generated TypeScript is
# committed (the Docker build has no Python); tests/messages/test_wire_types.py fails when it
# differs from what the model gives.
MESSAGE_TYPES := frontend/src/lib/message.gen.ts
MESSAGE_MODEL := backend/messages/message.py backend/messages/kinds.py backend/messages/schema.py \
	$(wildcard backend/actions/registry/*.py backend/actions/registry/builtin/*.py) \
	backend/messages/payloads.py backend/messages/tasks.py backend/tools/mcp/parts.py
GEN_TYPES := frontend/scripts/gen-types.mjs frontend/node_modules/.package-lock.json
# the message schema, into the file $$schema of a temporary folder removed afterwards
WITH_MESSAGE_SCHEMA = schema=$$(mktemp -d)/message.schema.json; \
	trap 'rm -rf "$${schema%/*}"' EXIT; \
	.venv/bin/python -m backend.actions.registry.wire > "$$schema"

.PHONY: frontend-types

$(MESSAGE_TYPES): $(MESSAGE_MODEL) $(GEN_TYPES) | .venv/.synced
	@$(WITH_MESSAGE_SCHEMA); cd frontend && node scripts/gen-types.mjs "$$schema" \
		src/lib/message.gen.ts backend/actions/registry/wire.py --embed messageSchema

frontend-types: $(MESSAGE_TYPES)

# the build uses the generated types: regenerate them first when the model changed
frontend/dist/index.html: $(MESSAGE_TYPES)

# typed payloads: the API's answers take the same road as the message model, from their
# models (backend/api/wire_types.py) to frontend/src/lib/api.gen.ts (the interfaces the
# message schema has too are imported from message.gen.ts); api.schema.json and api.gen.ts are
# committed and tests/api/test_wire_types.py fails when they differ from the models.
API_SCHEMA := frontend/src/lib/api.schema.json
API_TYPES := frontend/src/lib/api.gen.ts
API_MODELS := backend/api/wire_types.py backend/api/models.py backend/api/previews.py \
	backend/store/shapes.py backend/tools/mcp/parts.py backend/messages/tasks.py \
	backend/waits/replies.py

$(API_SCHEMA): $(API_MODELS) | .venv/.synced
	@.venv/bin/python -m backend.api.wire_types > $@.tmp && mv $@.tmp $@

$(API_TYPES): $(API_SCHEMA) $(MESSAGE_MODEL) $(GEN_TYPES) | .venv/.synced
	@$(WITH_MESSAGE_SCHEMA); cd frontend && node scripts/gen-types.mjs src/lib/api.schema.json \
		src/lib/api.gen.ts backend/api/wire_types.py --shared "$$schema=./message.gen"

frontend-types: $(API_TYPES)
frontend/dist/index.html: $(API_TYPES)

# docs/api.md's tables of the actions (approval classes, stream kinds and payloads) are made
# from the action registry too (backend/actions/registry/docs.py); tests/test_docs_match_code.py
# fails when the committed tables differ from the registry's.
.PHONY: action-docs
action-docs: | .venv/.synced
	@.venv/bin/python -m backend.actions.registry.docs docs/api.md

frontend-types: action-docs
