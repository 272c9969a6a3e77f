#!/usr/bin/env bash
# Build an spu-scaffold image on this machine (docs/docker.md): Docker set up first (scripts/setup-docker.sh),
# then `docker build --network host`, cached between runs (only the layers whose inputs changed rebuild).
#   bash scripts/build-image.sh            the CPU image, every extra          -> spu-scaffold:cpu
#   bash scripts/build-image.sh gpu        Dockerfile.gpu                      -> spu-scaffold:gpu
# Variables: SPU_IMAGE (the tag), SPU_EXTRAS (e.g. chem,qc,web: a smaller image), SPU_BASE_IMAGE (a stand-in
# base, e.g. debian:bookworm-slim for Dockerfile.gpu where no registry serves the CUDA image).
# Where pip's local wheels hold the CPU torch build (scripts/setup-docker.sh links them into docker/wheels/),
# the torch index is not contacted. Prints the image's size and the build's time at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-cpu}
case "$kind" in
  cpu) dockerfile=Dockerfile ;;
  gpu) dockerfile=Dockerfile.gpu ;;
  *) echo "build-image: the kind is cpu or gpu, not '$kind'" >&2; exit 2 ;;
esac
image=${SPU_IMAGE:-spu-scaffold:$kind}
bash scripts/setup-docker.sh
args=(--network host -f "$dockerfile" -t "$image")
[ -n "${SPU_EXTRAS:-}" ] && args+=(--build-arg "SPU_EXTRAS=$SPU_EXTRAS")
[ -n "${SPU_BASE_IMAGE:-}" ] && args+=(--build-arg "BASE_IMAGE=$SPU_BASE_IMAGE")
if compgen -G "docker/wheels/torch-*+cpu-*.whl" >/dev/null; then
  args+=(--build-arg TORCH_INDEX_URL=)
fi
# Without the buildx plugin (Debian's docker.io) the classic builder does it; the Dockerfiles need nothing more.
if ! docker buildx version >/dev/null 2>&1; then
  export DOCKER_BUILDKIT=0
fi
start=$(date +%s)
docker build "${args[@]}" .
echo "build-image: $image built in $(( $(date +%s) - start )) s; size $(docker image inspect "$image" --format '{{.Size}}' | awk '{printf "%.2f GB", $1/1e9}')"
