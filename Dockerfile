# One image for every topoplace service; the command picks the service.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY schemas ./schemas
COPY services ./services
COPY topoplace ./topoplace
RUN pip install --no-cache-dir .
COPY deploy/compose /etc/topoplace
ENTRYPOINT ["topoplace"]
