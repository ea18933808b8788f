# gpufabric webhook + labeler + certificate bootstrap: multi-stage, slim, non-root.
# docker build -f docker/webhook.Dockerfile -t gpufabric-webhook .
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY common common
COPY agent agent
COPY webhook webhook
COPY certs certs
RUN pip wheel --no-cache-dir --wheel-dir /wheels '.[webhook]'

FROM python:3.11-slim
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index /wheels/*.whl && rm -rf /wheels
USER 65532:65532
ENTRYPOINT ["gpufabric-webhook"]
CMD ["serve", "--tls-cert=/tls/tls.crt", "--tls-key=/tls/tls.key"]
