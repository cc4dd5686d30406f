# One image for every topoplace service; the command picks the service.
# Base pinned by version; tag the image with the package version (see docs/deploy.md).
FROM python:3.11.13-slim-bookworm
WORKDIR /app
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY engine ./engine
COPY services ./services
COPY topoplace ./topoplace
RUN pip install --no-cache-dir . && useradd --uid 10001 --no-create-home --shell /usr/sbin/nologin topoplace
COPY deploy/compose /etc/topoplace
# The manifests run it as this user with a read-only root file system.
USER 10001
ENTRYPOINT ["topoplace"]
