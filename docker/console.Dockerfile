# The operator's console (console/gateway.py) for docker-compose: Debian's
# Python with python3-grpcio and python3-protobuf (it learns the ops API by
# reflection, no generated code), protoc for the payloads' field names
# (proto/), Chart.js from libjs-chart.js. Nothing to compile: a small image.
# DEBIAN_RELEASE (12 or 13) as in docker/Dockerfile.
ARG DEBIAN_RELEASE=12
FROM debian:${DEBIAN_RELEASE}-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 python3-grpcio python3-protobuf protobuf-compiler libjs-chart.js \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /nonexistent --no-create-home outbox
COPY console/ /opt/outbox/console/
COPY proto/ /opt/outbox/proto/
ENV PYTHONDONTWRITEBYTECODE=1
USER outbox
ENTRYPOINT ["/usr/bin/python3", "/opt/outbox/console/gateway.py"]
