# gpufabric agent: multi-stage, slim, no compilers in the final image.
# docker build -f docker/agent.Dockerfile -t gpufabric-agent .
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY common common
COPY agent agent
COPY webhook webhook
COPY certs certs
RUN pip wheel --no-cache-dir --wheel-dir /wheels '.[agent]'

FROM python:3.11-slim
# libudev for pyudev; NVML (libnvidia-ml.so.1) comes from the NVIDIA container runtime.
RUN apt-get update && apt-get install -y --no-install-recommends libudev1 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index /wheels/*.whl && rm -rf /wheels
# Runs as root without capabilities (see daemonset/base/agent/daemonset.yaml for why); uid 0 is
# set by the manifest, the image default stays non-root for anything else that runs it.
USER 65532:65532
ENTRYPOINT ["gpufabric-agent"]
CMD ["run"]
