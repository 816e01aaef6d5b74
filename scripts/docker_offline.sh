#!/bin/sh
# Builds the Dockerfile where no container registry is reachable and no Docker engine runs (this
# project's own machines): the two base images are made locally instead of pulled, then buildah
# builds the Dockerfile itself, unchanged.
#
#   debian:bookworm-slim   Debian 12 from Debian's archive (debootstrap, minbase variant)
#   rust:1-slim-bookworm   the same, with gcc and libc6-dev, and this machine's rustup toolchain
#                          copied in where the official image keeps its own (/usr/local/rustup,
#                          /usr/local/cargo)
#
# They stand in for the official images (same Debian release, same layout and environment), so
# what this checks is the Dockerfile: its stages, the build command of each BUILD, the user, the
# copy of the binary, the entry point. The certificates of /usr/local/share/ca-certificates (a
# proxy's, where the network has one) are added to the build image only, so cargo can download.
#
#   apt-get install buildah debootstrap
#   scripts/docker_offline.sh [full|minimal]        # -> localhost/capvault:full (or :minimal)
#
# buildah runs with chroot isolation (no OCI runtime needed) and the host's network. Run the
# image the same way: `buildah from localhost/capvault:full`, then `buildah run --isolation
# chroot --network host ...` (docs/platforms.md, "Docker").
set -eu

BUILD="${1:-full}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${DOCKER_OFFLINE_DIR:-/var/tmp/capvault-docker-offline}"
mkdir -p "$WORK"

if ! buildah images --quiet localhost/debian:bookworm-slim 2>/dev/null | grep -q .; then
    echo "--- debian:bookworm-slim from Debian's archive"
    rm -rf "$WORK/rootfs"
    if ! debootstrap --variant=minbase bookworm "$WORK/rootfs" http://deb.debian.org/debian \
        >"$WORK/debootstrap.log" 2>&1; then
        echo "debootstrap failed; its output: $WORK/debootstrap.log" >&2
        exit 1
    fi
    c=$(buildah from scratch)
    cp -a "$WORK/rootfs/." "$(buildah mount "$c")/"
    buildah umount "$c" >/dev/null
    buildah commit --quiet "$c" localhost/debian:bookworm-slim >/dev/null
    buildah rm "$c" >/dev/null
fi

if ! buildah images --quiet localhost/rust:1-slim-bookworm 2>/dev/null | grep -q .; then
    echo "--- rust:1-slim-bookworm: Debian, gcc and this machine's toolchain"
    c=$(buildah from --pull=never localhost/debian:bookworm-slim)
    if [ -n "$(ls /usr/local/share/ca-certificates 2>/dev/null)" ]; then
        buildah copy "$c" /usr/local/share/ca-certificates/ /usr/local/share/ca-certificates/ >/dev/null
    fi
    if ! buildah run --isolation chroot --network host "$c" -- sh -c \
        'apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends gcc libc6-dev ca-certificates && update-ca-certificates' \
        >"$WORK/apt.log" 2>&1; then
        echo "installing gcc in the build image failed; its output: $WORK/apt.log" >&2
        exit 1
    fi
    toolchain="$(rustup toolchain list | awk '/default/ {print $1}')"
    mnt=$(buildah mount "$c")
    mkdir -p "$mnt/usr/local/rustup/toolchains" "$mnt/usr/local/cargo/bin"
    cp -a "$(rustup show home)/toolchains/$toolchain" "$mnt/usr/local/rustup/toolchains/"
    printf 'version = "12"\ndefault_toolchain = "%s"\nprofile = "default"\n' "$toolchain" \
        >"$mnt/usr/local/rustup/settings.toml"
    cp "$(command -v rustup)" "$mnt/usr/local/cargo/bin/rustup"
    for b in cargo rustc rustdoc; do ln -sf rustup "$mnt/usr/local/cargo/bin/$b"; done
    buildah umount "$c" >/dev/null
    buildah config --env RUSTUP_HOME=/usr/local/rustup --env CARGO_HOME=/usr/local/cargo \
        --env PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$c"
    buildah commit --quiet "$c" localhost/rust:1-slim-bookworm >/dev/null
    buildah rm "$c" >/dev/null
fi

echo "--- the Dockerfile, BUILD=$BUILD"
# --format docker keeps the HEALTHCHECK (the OCI image format has none).
buildah bud --isolation chroot --network host --pull=never --format docker \
    --build-arg "BUILD=$BUILD" -t "localhost/capvault:$BUILD" "$ROOT"
