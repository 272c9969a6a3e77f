# spu-scaffold on the CPU: every extra (web, chem, qc, md, protein, mlip, dock, pka, cluster) with the CPU
# build of torch, on Debian bookworm's Python 3.11. The image the Harbor tasks run on without a GPU.
#
#   bash scripts/setup-docker.sh                       # engine, compose plugin, base image (docs/docker.md)
#   docker build --network host -t spu-scaffold:cpu .
#   docker run --rm spu-scaffold:cpu spu doctor        # what works, with fixes
#   docker run --rm -i spu-scaffold:cpu                # the MCP server on stdio (CMD spu serve)
#
# Build arguments: BASE_IMAGE (debian:bookworm-slim; scripts/setup-docker.sh builds a stand-in locally
# where no registry answers), SPU_EXTRAS (all; CI builds a smaller set), TORCH_VERSION, TORCH_INDEX_URL
# (the CPU wheels; empty to use only docker/wheels/ and PyPI), SPU_UID. Size and build time: docs/docker.md.

ARG BASE_IMAGE=debian:bookworm-slim

# The sources as .dockerignore admits them, without the build inputs in docker/ (the wheel built from them
# below is what the image takes: pyproject.toml's package-data decides what ships, as for the wheel on PyPI)
FROM ${BASE_IMAGE} AS src
COPY . /src
RUN rm -rf /src/docker

# Debian's Python and the system libraries: the base of the stages below
FROM ${BASE_IMAGE} AS python

ENV DEBIAN_FRONTEND=noninteractive \
    PYTHONUNBUFFERED=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    SPU_WORKDIR=/srv/spu/work \
    SPU_CACHE_DIR=/srv/spu/.cache/spu \
    OMP_NUM_THREADS=1

# Python 3.11 (xtb-python has wheels only up to 3.11); libgomp/libxrender/libxext for RDKit and xTB; curl
# for agents. Debian's security updates replace exact versions, so these are not pinned (the base image is).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates passwd \
       libgomp1 libxrender1 libxext6 procps curl \
    && rm -rf /var/lib/apt/lists/*

# Extra CA certificates for pip behind a TLS-inspecting proxy (docker/extra-ca/README.md)
COPY docker/extra-ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null

# The virtual environment with torch (CPU build; only for the extras that use it), in a stage of its own:
# the local wheels copied in (docker/wheels/, 192 MB with torch) stay out of the image, which takes only the
# environment. (Build arguments declared here, not above, so that images with other extras share the
# layers before.)
FROM python AS venv
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG SPU_EXTRAS=all
COPY docker/wheels/ /opt/spu-wheels/
# pinned through the build argument, which hadolint does not read
# hadolint ignore=DL3013
RUN python3 -m venv /opt/venv && pip install -q setuptools==80.9.0 wheel==0.45.1 \
    && case ",$SPU_EXTRAS," in \
      *,all,*|*,protein,*|*,mlip,*) \
        pip install -q --find-links /opt/spu-wheels ${TORCH_INDEX_URL:+--extra-index-url "$TORCH_INDEX_URL"} \
          "torch==${TORCH_VERSION}" ;; \
    esac

# The project's wheel, built from the sources: of a task folder it holds only task/ (what the agent sees),
# never the answers, card, spec or notes beside it
FROM venv AS wheel
COPY --from=src /src/ /opt/spu-scaffold/
RUN pip wheel -q --no-deps --no-build-isolation -w /opt/spu-wheel /opt/spu-scaffold

FROM python
ARG TORCH_VERSION=2.13.0
ARG SPU_EXTRAS=all
COPY --from=venv /opt/venv /opt/venv
# Heavy, rarely changing layers first: every dependency of the extras, then the project.
COPY pyproject.toml docker/pyproject_deps.py /opt/spu-build/
RUN python /opt/spu-build/pyproject_deps.py /opt/spu-build/pyproject.toml "$SPU_EXTRAS" \
       > /opt/spu-build/requirements.txt \
    && echo "torch==${TORCH_VERSION}" > /opt/spu-build/torch.txt \
    && pip install -q -r /opt/spu-build/requirements.txt -c /opt/spu-build/torch.txt \
    && rm -rf /opt/spu-build

COPY --from=wheel /opt/spu-wheel/ /opt/spu-wheel/
# hadolint ignore=DL3013
RUN pip install -q --no-deps /opt/spu-wheel/spu_scaffold-*.whl \
    && python -c "import spu, tools_server, scaffold, environment" \
    && spu --help > /dev/null

ARG SPU_UID=1000
RUN useradd --create-home --home-dir /srv/spu --uid ${SPU_UID} --shell /bin/bash spu \
    && mkdir -p /srv/spu/work /srv/spu/.cache/spu \
    && chown -R spu:spu /srv/spu

USER ${SPU_UID}
WORKDIR /srv/spu
# No ENTRYPOINT: Harbor runs `sh -c ...` in the container. The check is cheap and frequent, because
# `docker compose up --wait` (Harbor) waits for the first healthy answer.
HEALTHCHECK --interval=5s --timeout=20s --start-period=60s --retries=3 \
    CMD ["/opt/venv/bin/python", "-c", "import spu"]
CMD ["spu", "serve"]
