# Containerized deployment (docker compose); see docs/deploy.md.
#   make compose-up       build and start the stack (reads .env; AUTH_TOKEN required)
#   make compose-down     stop and remove the containers (volumes kept)
#   make compose-verify   the CI check: build, up, a run against the fake model, restart,
#                         down -v (scripts/compose/verify.sh; local base image, no registry)
COMPOSE ?= docker compose

.PHONY: compose-up compose-down compose-logs compose-verify

compose-up:
	@$(COMPOSE) version >/dev/null 2>&1 || { echo "Docker Compose v2 is missing: install docker-compose-plugin (or bash scripts/compose/ensure-compose.sh)" >&2; exit 1; }
	$(COMPOSE) up -d --build

compose-down:
	$(COMPOSE) down

compose-logs:
	$(COMPOSE) logs -f app

compose-verify: docker-base-image
	bash scripts/compose/verify.sh
