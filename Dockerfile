# planact app image: UI + API on port 8000.
#
#   docker compose build                       (official base images, see docker-compose.yml)
#   docker build -t planact .                  (same, by hand)
#   docker build --network host -t planact \   (no registry: local Debian base, UI built on
#     --build-arg PYTHON_IMAGE=planact-base:bookworm \      the host with `npm ci && npm run
#     --build-arg NODE_IMAGE=planact-base:bookworm \        build` in frontend/ beforehand)
#     --build-arg FRONTEND_PREBUILT=1 .
#
# Works with BuildKit and with the classic builder (no BuildKit-only syntax), so that it
# builds on old engines and on hosts without the buildx plugin.
# Behind a TLS-intercepting proxy, pass its CA certificate(s) as PEM text in the build arg
# EXTRA_CA_CERTS: the build stages trust them for npm, pip and uv; the final image does not
# carry them.

ARG PYTHON_IMAGE=python:3.12-slim-bookworm
ARG NODE_IMAGE=node:20-bookworm-slim

# ---- the web client -------------------------------------------------------------------
FROM ${NODE_IMAGE} AS frontend
# 1: take frontend/dist from the build context as it is (built on the host) instead of
# building it here; for bases without a recent Node (Vite needs Node >= 20.19).
ARG FRONTEND_PREBUILT=0
ARG EXTRA_CA_CERTS=""
ENV NODE_EXTRA_CA_CERTS=/tmp/extra-ca.pem
WORKDIR /src/frontend
COPY frontend/package.json frontend/package-lock.json ./
RUN printf '%s\n' "$EXTRA_CA_CERTS" >/tmp/extra-ca.pem; \
    if [ "$FRONTEND_PREBUILT" != 1 ]; then npm ci --no-audit --no-fund; fi
COPY frontend/ ./
RUN set -e; \
    if [ "$FRONTEND_PREBUILT" = 1 ]; then \
      test -f dist/index.html || { echo "FRONTEND_PREBUILT=1 but frontend/dist/index.html" \
        "is missing: run 'npm ci && npm run build' in frontend/ first" >&2; exit 1; }; \
    else \
      rm -rf dist && npm run build; \
    fi

# ---- Python dependencies (locked) -----------------------------------------------------
FROM ${PYTHON_IMAGE} AS python-build
ARG UV_VERSION=0.13.9
ARG EXTRA_CA_CERTS=""
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PYTHON_PREFERENCE=only-system \
    UV_PROJECT_ENVIRONMENT=/app/.venv \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN set -e; \
    if [ -n "$EXTRA_CA_CERTS" ]; then \
      printf '%s\n' "$EXTRA_CA_CERTS" >/usr/local/share/ca-certificates/extra-ca.crt; \
      update-ca-certificates >/dev/null; \
    fi; \
    python3 -m venv /opt/uv; \
    /opt/uv/bin/pip install --no-cache-dir "uv==${UV_VERSION}"
WORKDIR /app
# dependencies first: this layer is reused as long as the lock does not change
COPY pyproject.toml uv.lock ./
RUN /opt/uv/bin/uv sync --frozen --no-dev --no-install-project --no-cache
COPY README.md ./
COPY backend/ backend/
RUN /opt/uv/bin/uv sync --frozen --no-dev --no-cache

# ---- runtime --------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
# the app's user; the entrypoint starts as root only to give it the data and workspace
# folders and the Docker socket's group, then drops to it (PUID/PGID change the ids)
RUN groupadd --system --gid 10001 planact \
 && useradd --system --uid 10001 --gid planact --home-dir /app --no-create-home \
      --shell /usr/sbin/nologin planact
WORKDIR /app
COPY --from=python-build /app /app
COPY --from=frontend /src/frontend/dist /app/frontend/dist
COPY scripts/compose/entrypoint.py /usr/local/lib/planact/entrypoint.py
RUN mkdir -p /app/data /app/workspace && chown planact:planact /app/data /app/workspace

# RUNTIME=docker: bubblewrap cannot sandbox the local runtime inside a container (docs/
# deploy.md), so commands run in a sandbox container per conversation; RUNTIME=local in
# .env overrides it (unsandboxed, inside this container)
ENV PATH=/app/.venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True \
    FRONTEND_DIST=/app/frontend/dist \
    DATABASE_URL=sqlite:////app/data/planact.db \
    WORKSPACE_DIR=/app/workspace \
    RUNTIME=docker \
    HOST=0.0.0.0 \
    PORT=8000

EXPOSE 8000
HEALTHCHECK --interval=5s --timeout=15s --start-period=60s --retries=3 \
  CMD ["python3", "-c", "import os, urllib.request as r; r.urlopen('http://127.0.0.1:%s/api/ready' % os.environ.get('PORT', '8000'), timeout=12)"]
ENTRYPOINT ["python3", "/usr/local/lib/planact/entrypoint.py"]
CMD ["planact", "serve"]
