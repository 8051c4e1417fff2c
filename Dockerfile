# Checkpoint's gateway image: `checkpoint serve` as a non-root user on a read-only root filesystem.
#
#   docker build -t checkpoint .                       # or: podman build -t checkpoint .
#   podman build --build-arg BASE_IMAGE=my-debian-python -t checkpoint .
#
# BASE_IMAGE: any Debian-based image with python3 >= 3.11 and its venv module (no pip, curl or registry needed in
# it). Both stages start from it, so the virtual environment's python is the runtime's. pip runs with the build's
# own configuration, never isolated from it: a builder behind a private index or a TLS-intercepting proxy gives the
# build its pip.conf (and the CA bundle it names), e.g. `podman build -v /etc/pip.conf:/etc/pip.conf:ro -v CA:CA:ro .`
# or `docker build --secret id=pip.conf,src=/etc/pip.conf .`; nothing of it is left in the image. docs/deploy.md.
ARG BASE_IMAGE=docker.io/library/python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
ENV PYTHONDONTWRITEBYTECODE=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /build
COPY pyproject.toml README.md ./
COPY src ./src
# pip reads /etc/pip.conf when the builder provides one: a bind mount (podman build -v), or a BuildKit secret
# (docker build --secret id=pip.conf,src=… and, for the CA bundle it names as /etc/pip-ca.pem, id=pip-ca).
RUN --mount=type=secret,id=pip.conf,target=/etc/pip.conf,required=false \
    --mount=type=secret,id=pip-ca,target=/etc/pip-ca.pem,required=false \
    python3 -m venv /opt/checkpoint \
 && /opt/checkpoint/bin/python -m pip install ".[postgres]" \
 && /opt/checkpoint/bin/checkpoint --version \
 && groupadd --gid 10001 checkpoint \
 && useradd --no-log-init --uid 10001 --gid 10001 --home-dir /tmp --no-create-home --shell /usr/sbin/nologin checkpoint

# The runtime stage runs no command: what a builder mounts into RUN steps (its pip settings) never touches it.
FROM ${BASE_IMAGE}
COPY --from=build /etc/passwd /etc/group /etc/
COPY --from=build /opt/checkpoint /opt/checkpoint
COPY deploy/healthcheck.py /usr/local/bin/checkpoint-healthcheck
# Nothing is written outside /tmp: no bytecode, HOME and the XDG directories under /tmp (a tmpfs or emptyDir).
ENV PATH=/opt/checkpoint/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    XDG_CACHE_HOME=/tmp/.cache \
    XDG_CONFIG_HOME=/tmp/.config \
    XDG_DATA_HOME=/tmp/.local/share \
    XDG_STATE_HOME=/tmp/.local/state \
    CHECKPOINT_SERVE_LISTEN=0.0.0.0:8808
USER 10001:10001
WORKDIR /tmp
EXPOSE 8808
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 CMD ["python3", "/usr/local/bin/checkpoint-healthcheck"]
ENTRYPOINT ["checkpoint"]
CMD ["serve", "--help"]
