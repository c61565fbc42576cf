# syntax=docker/dockerfile:1
#
# priority-webhook image: `docker build -t priority-webhook:$(python3 -c 'import webhook; print(webhook.__version__)') .`
# (the tag the chart defaults to: its appVersion, which a test keeps equal to the package version)
#
# Two stages on the same slim Python base. The builder installs the dependencies that setup.cfg declares,
# at the versions constraints.txt pins (two builds of one commit get the same packages), into a virtual
# environment under /opt, in a layer of their own: a change to the source alone does not reinstall them.
# Then it makes a wheel of the project and installs it without dependencies. The runtime stage copies
# only that environment: no compiler, no pip, no source tree, no build cache, no secrets.
# Pin the base by digest for reproducible builds: --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:...

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY setup.cfg constraints.txt ./
# Dependencies install from wheels only: nothing is compiled, so the builder needs no toolchain either.
RUN python -c "import configparser; c = configparser.ConfigParser(); c.read('setup.cfg'); print(c['options']['install_requires'])" > requirements.txt \
 && python -m venv --without-pip /opt/priority-webhook \
 && python -m pip --python /opt/priority-webhook/bin/python install --only-binary=:all: -c constraints.txt -r requirements.txt
COPY pyproject.toml README.md LICENSE ./
COPY webhook ./webhook
RUN python -m pip wheel --no-deps --wheel-dir /wheels . \
 && python -m pip --python /opt/priority-webhook/bin/python install --no-deps /wheels/priority_webhook-*.whl \
 && cp LICENSE /opt/priority-webhook/LICENSE

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="priority-webhook" \
      org.opencontainers.image.description="Out-of-tree Kubernetes pod priority: admission webhook and node preemption sidecar" \
      org.opencontainers.image.licenses="Apache-2.0"
# The base image's own installer is not needed at run time.
RUN python -m pip uninstall --yes pip setuptools wheel
COPY --from=builder /opt/priority-webhook /opt/priority-webhook
ENV PATH=/opt/priority-webhook/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# A numeric user (and group) so that Kubernetes can verify runAsNonRoot without reading /etc/passwd.
USER 65532:65532
# 8443: webhook HTTPS (/mutate, /validate, /healthz, /readyz, /metrics); 9090: sidecar health and metrics.
EXPOSE 8443 9090
ENTRYPOINT ["priority-webhook"]
CMD ["--help"]
