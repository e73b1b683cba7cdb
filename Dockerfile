# dpwatch: API + worker image. Build: docker build -t dpwatch .
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# Dependencies first, so that code changes do not invalidate the dependency layer.
COPY pyproject.toml README.md ./
# The SDK (dpwatch-sdk) is a dependency of the service, installed from its folder.
COPY sdk/python ./sdk/python
RUN mkdir -p app && touch app/__init__.py \
 && python -m venv /opt/venv \
 && /opt/venv/bin/pip install --upgrade pip \
 && /opt/venv/bin/pip install ./sdk/python .
COPY app ./app
COPY migrations ./migrations
COPY alembic.ini ./
# Reinstall the project itself (not its dependencies) with the real sources, editable, so that
# the top-level migrations/ folder is found next to the package.
RUN /opt/venv/bin/pip install --no-deps -e .

FROM python:3.11-slim
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    DPWATCH_ENV=production \
    DPWATCH_LOG_FORMAT=json
RUN useradd --create-home --uid 10001 dpwatch
COPY --from=build /opt/venv /opt/venv
COPY --from=build /src /src
WORKDIR /src
RUN mkdir -p /src/data && chown dpwatch /src/data
USER dpwatch
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status == 200 else 1)"
# Default: API and worker in one process. Use `dpwatch worker` for worker-only replicas.
CMD ["dpwatch", "serve", "--host", "0.0.0.0", "--port", "8000"]
