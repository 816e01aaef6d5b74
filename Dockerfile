# capvault serving a vault over Streamable HTTP, as a non-root user: the way to run it on a NAS
# or a server for remote clients.
#
#   docker build -t capvault .                                   # the full build
#   docker build --build-arg BUILD=minimal -t capvault:minimal .  # stdio only (see below)
#   docker run -d --name capvault -p 127.0.0.1:8000:8000 \
#     -e CAPVAULT_TOKEN="$(capvault token new --scope read 2>/dev/null)" \
#     -v ~/Notes:/vault:ro -v capvault-state:/state capvault
#
# The vault is mounted read-only; for writes mount it read-write (drop `:ro`) and append
# `--write --state-dir /state/history` to the command (history and audit log go to the volume).
# Inside the container capvault listens on all interfaces, so it requires a token (the
# environment's CAPVAULT_TOKEN, or `--token-file` with a mode-600 file readable by uid 10001) and,
# without TLS of its own (`--tls-cert`/`--tls-key`), `--insecure-http`: publish the port on
# loopback only, as above, and put a TLS-terminating proxy in front for remote clients (then add
# `--allowed-host` with the name it forwards). tests/dockerfile.rs runs this file's command and
# health check against the binary, so they stay in step with its flags; where no registry or
# Docker engine is at hand, scripts/docker_offline.sh builds this file with buildah.
#
# The minimal build (`--no-default-features`: no HTTP, no OAuth, no model runtime) serves over
# stdio only; a local client starts it itself, the vault mounted read-only:
#   docker run -i --rm --read-only -v ~/Notes:/vault:ro capvault:minimal serve /vault --no-index-cache

FROM rust:1-slim-bookworm AS build
# "full" (the default features) or "minimal" (`--no-default-features`).
ARG BUILD=full
WORKDIR /src
COPY . .
RUN case "$BUILD" in \
      full) cargo build --release --locked --bin capvault ;; \
      minimal) cargo build --release --locked --bin capvault --no-default-features ;; \
      *) echo "BUILD is full or minimal, not $BUILD" >&2; exit 1 ;; \
    esac

FROM debian:bookworm-slim
RUN useradd --uid 10001 --user-group --no-create-home --home-dir /state --shell /usr/sbin/nologin capvault \
    && mkdir -p /state /vault && chown capvault:capvault /state && chmod 700 /state
COPY --from=build /src/target/release/capvault /usr/local/bin/capvault
USER 10001
VOLUME ["/state"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/8000 && printf 'GET /healthz HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && grep -q '^HTTP/1.[01] 200' <&3"]
ENTRYPOINT ["capvault"]
CMD ["serve", "/vault", "--transport", "http", "--listen", "0.0.0.0:8000", "--insecure-http", "--index-cache", "/state/cache"]
