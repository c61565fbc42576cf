# syntax=docker/dockerfile:1
#
# priority-webhook image. `scripts/image` builds it (podman or buildah) and prints its reference; by hand:
#   docker build --build-arg VERSION=$(python3 -c 'import webhook; print(webhook.__version__)') \
#     --build-arg REVISION=$(git rev-parse HEAD) -t priority-webhook:$(python3 -c 'import webhook; print(webhook.__version__)') .
# (the tag the chart defaults to: its appVersion, which a test keeps equal to the package version)
#
# Two stages on the same slim Python base. The builder makes a build environment of its own (pip, setuptools
# and wheel at the versions constraints.txt pins), installs the dependencies that setup.cfg declares at the
# versions constraints.txt pins into a virtual environment under /opt, in a layer of their own (a change to
# the source alone does not reinstall them), then builds a wheel of the project without build isolation (so
# with those pinned build tools and without the network) and installs it without dependencies. Two builds
# of one commit install the same packages, build tools included. The runtime stage copies only that
# environment: no compiler, no build tools, no source tree, no build cache, no secrets.
#
# Reproducible: two builds of one commit on one base give the same image ID. `scripts/image` passes the
# commit's time as SOURCE_DATE_EPOCH (a build argument) and as `--timestamp`, which sets the image's and its
# history's dates and every file's time in the new layers.
# pip compiles nothing (its bytecode would record the install time); compileall writes unchecked-hash
# bytecode, which records no time and is never compared with its source (the image does not change). The
# project's wheel is built with SOURCE_DATE_EPOCH from files made world-readable and owner-writable (the
# checkout's own modes depend on its umask). Pin the base by digest:
#   --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:...
#
# The SBOM: the builder writes a CycloneDX SBOM of what the runtime stage holds (every Python distribution
# of the environment and of the base's interpreter, every Debian package of the base, with licences) to
# /opt/priority-webhook/sbom.cdx.json, with the CycloneDX project's own tools (scripts/sbom.py). The build
# stage has the same base as the runtime stage and installs nothing into it, so the base it reads is the
# runtime's.
#
# Build-time configuration of pip (an index, a proxy's CA) comes as build secrets, which are mounted for one
# RUN and never stored in a layer: `--secret id=pip.conf,src=FILE` (a pip configuration file) and
# `--secret id=ca.crt,src=FILE` (a CA bundle, which that configuration names as /run/secrets/ca.crt).
# Without them pip uses its defaults.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_CONFIG_FILE=/run/secrets/pip.conf \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY setup.cfg constraints.txt ./
# Dependencies install from wheels only: nothing is compiled, so the builder needs no toolchain either.
# The client's asyncio half (kubernetes/aio, 68 MB) and the aiohttp stack that only it imports (12 MB) are
# never loaded by any command: they are removed here, before the environment is copied, so the image is
# smaller by their size (tests/image imports every module of the project inside the image).
RUN --mount=type=secret,id=pip.conf --mount=type=secret,id=ca.crt \
    python -m venv /opt/build \
 && /opt/build/bin/python -m pip install --only-binary=:all: -c constraints.txt pip setuptools wheel \
      cyclonedx-bom python-debian \
 && /opt/build/bin/python -c "import configparser; c = configparser.ConfigParser(); c.read('setup.cfg'); print(c['options']['install_requires'])" > requirements.txt \
 && python -m venv --without-pip /opt/priority-webhook \
 && /opt/build/bin/python -m pip --python /opt/priority-webhook/bin/python install --no-compile --only-binary=:all: -c constraints.txt -r requirements.txt \
 && /opt/build/bin/python -m pip --python /opt/priority-webhook/bin/python uninstall --yes \
      aiohttp aiohttp-retry aiohappyeyeballs aiosignal attrs frozenlist multidict propcache yarl \
 && rm -r "$(/opt/priority-webhook/bin/python -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("kubernetes").origin))')/aio" \
 && /opt/priority-webhook/bin/python -m compileall -q -j 0 --invalidation-mode unchecked-hash /opt/priority-webhook/lib
COPY pyproject.toml README.md LICENSE ./
COPY webhook ./webhook
COPY scripts/sbom.py ./scripts/
# From here on the commit's time is in the build (the wheel's and the SBOM's dates), and so in the cache
# keys: a new commit rebuilds what follows. The dependencies above carry no date (their bytecode records
# none, and the runtime stage's copy of them is dated by --timestamp), so their layer stays cached.
ARG SOURCE_DATE_EPOCH
RUN chmod -R u+rwX,go+rX-w . \
 && /opt/build/bin/python -m pip wheel --no-deps --no-build-isolation --no-index --wheel-dir /wheels . \
 && /opt/build/bin/python -m pip --python /opt/priority-webhook/bin/python install --no-deps --no-index /wheels/priority_webhook-*.whl --no-compile \
 && /opt/priority-webhook/bin/python -m compileall -q --invalidation-mode unchecked-hash \
      "$(/opt/priority-webhook/bin/python -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("webhook").origin))')" \
 && cp LICENSE /opt/priority-webhook/LICENSE \
 && /opt/build/bin/python scripts/sbom.py contents --environment /opt/priority-webhook \
      --tools /opt/build/bin --output /opt/priority-webhook/sbom.cdx.json

# The runtime stage adds the environment to the base and changes nothing else. The base's own pip stays:
# removing it in a later layer would only hide its files (the image would not shrink), and the runtime user
# can write nowhere it could install to (the root filesystem is read-only, the environment root-owned).
FROM ${PYTHON_IMAGE} AS runtime
COPY --from=builder /opt/priority-webhook /opt/priority-webhook
ENV PATH=/opt/priority-webhook/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# A numeric user (and group) so that Kubernetes can verify runAsNonRoot without reading /etc/passwd.
USER 65532:65532
# 8443: webhook HTTPS (/mutate, /validate, /healthz, /readyz, /metrics); 9090: sidecar health and metrics.
EXPOSE 8443 9090
# No HEALTHCHECK: Kubernetes ignores it (the chart's liveness and readiness probes call /healthz and
# /readyz), and one image runs two commands with different ports (serve, sidecar), so no single check fits.
ENTRYPOINT ["priority-webhook"]
CMD ["--help"]
# Last, so that a new revision changes only the image's configuration, not a layer.
ARG VERSION=unknown
ARG REVISION=unknown
ARG SOURCE=https://github.com/priority-webhook/priority-webhook
LABEL org.opencontainers.image.title="priority-webhook" \
      org.opencontainers.image.description="Out-of-tree Kubernetes pod priority: admission webhook and node preemption sidecar" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}"
