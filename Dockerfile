# syntax=docker/dockerfile:1
# Container image of the push gateway (docs/OPERATIONS.md, "Image").
#
#   docker build -t push-gateway:0.1.0 .
#   docker run --rm -p 8080:8080 push-gateway:0.1.0      # embedded defaults: in-process broker, console sink
#
# This is the one recipe: CI builds this same file with podman (scripts/image), giving only other base images
# through the two build arguments below (bases made locally with debootstrap, as no registry is reachable there).
#
# Build stage: the Swift 6.3 toolchain on Debian bookworm, the C libraries' headers, and librdkafka >= 2.1 taken
# from the confluent-kafka wheel (Debian bookworm's librdkafka1 is 2.0.2, too old for current brokers).
# Runtime stage: Debian bookworm (slim) with the Swift runtime linked in statically, libcurl, libssl and that
# librdkafka; no compiler, no Debian librdkafka1, a stripped binary; runs as an unprivileged user.

ARG SWIFT_IMAGE=swift:6.3-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${SWIFT_IMAGE} AS build
ARG CONFLUENT_KAFKA_VERSION=2.16.1
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# Debian's security updates replace package versions: pinning them would break rebuilds (DL3008).
# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       librdkafka-dev libcurl4-openssl-dev libssl-dev pkg-config python3-pip binutils patchelf \
    && rm -rf /var/lib/apt/lists/*

# librdkafka from the wheel: a self-contained build (its own SSL, SASL, zstd, lz4) linked only against libc.
# The wheel names it librdkafka-<hash>.so.1 with that SONAME too, so ldconfig would index it under a name no
# binary asks for: it gets back the SONAME librdkafka.so.1, the name the gateway is linked against.
WORKDIR /rdkafka
RUN python3 -m pip download --no-deps --only-binary=:all: --dest /rdkafka/wheel \
       "confluent-kafka==${CONFLUENT_KAFKA_VERSION}" \
    && python3 -m zipfile -e /rdkafka/wheel/confluent_kafka-*.whl /rdkafka/unpacked \
    && cp /rdkafka/unpacked/confluent_kafka.libs/librdkafka-*.so.1 /rdkafka/librdkafka.so.1 \
    && patchelf --set-soname librdkafka.so.1 /rdkafka/librdkafka.so.1 \
    && rm -rf /rdkafka/wheel /rdkafka/unpacked

WORKDIR /src
# Dependencies first, so that a source change does not fetch them again. Package.resolved is not in the
# repository (docs/OPERATIONS.md, "Dependency versions"): the direct dependencies are pinned by `exact:` in
# Package.swift, and the versions resolved here are kept in the image (/usr/share/doc/push-gateway/).
COPY Package.swift ./
RUN swift package resolve
# Tests/ too: SwiftPM refuses a manifest whose (test) targets have no folder, even when building one product.
COPY Sources ./Sources
COPY Tests ./Tests
# Stripped, and without the development rpath ($ORIGIN/../../../.deps/lib, see Package.swift).
RUN swift build -c release --product push-gateway --static-swift-stdlib \
    && install -D -m 0755 "$(swift build -c release --show-bin-path)/push-gateway" /out/push-gateway \
    && strip --strip-all /out/push-gateway \
    && patchelf --remove-rpath /out/push-gateway \
    && install -D -m 0644 Package.resolved /out/Package.resolved

FROM ${RUNTIME_IMAGE} AS runtime
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       libcurl4 libssl3 ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 push \
    && useradd --system --uid 10001 --gid push --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin push \
    && mkdir -p /etc/push-gateway/secrets \
    && printf '# Embedded defaults; mount the real configuration here (docs/CONFIGURATION.md).\n{}\n' \
       > /etc/push-gateway/config.yaml

COPY --from=build /rdkafka/librdkafka.so.1 /usr/local/lib/librdkafka.so.1
COPY --from=build /out/Package.resolved /usr/share/doc/push-gateway/Package.resolved
COPY --from=build /out/push-gateway /usr/local/bin/push-gateway
# Every shared library resolves (librdkafka through ldconfig's cache of /usr/local/lib), else the build fails
# here, not at start.
RUN ldconfig \
    && ldd /usr/local/bin/push-gateway > /tmp/ldd.txt \
    && if grep "not found" /tmp/ldd.txt; then exit 1; fi \
    && grep -q "librdkafka.so.1 => /usr/local/lib/librdkafka.so.1" /tmp/ldd.txt \
    && rm /tmp/ldd.txt \
    && push-gateway --help > /dev/null

ENV PUSH_HTTP_HOST=0.0.0.0 \
    PUSH_LOG_FORMAT=json
USER 10001:10001
EXPOSE 8080
# SIGTERM: stop fetching, finish in-flight sends, commit offsets, exit 0 (Kubernetes sends it too).
STOPSIGNAL SIGTERM
ENTRYPOINT ["push-gateway"]
CMD ["run", "--config", "/etc/push-gateway/config.yaml"]
