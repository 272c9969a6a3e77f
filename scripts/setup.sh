#!/usr/bin/env bash
# Set up (or bring up to date) the project's virtual environment in .venv with every engine.
# Idempotent: a second run only checks. Python 3.11 is preferred (xtb-python has wheels up to 3.11).
# Packages go in with uv (parallel downloads and installs, compiled to bytecode as pip does), itself
# installed into .venv by pip; SPU_INSTALLER=pip uses pip throughout. Measured on 2 cores: 85 s with
# pip, 44 s with uv (33 s of it compiling bytecode), from empty caches (docs/testing.md).
#   PYTHON=python3.11 bash scripts/setup.sh      choose the interpreter
#   SPU_EXTRAS=all,dev                           extras to install (default: all,dev)
#   SPU_COMPILE_BYTECODE=lazy                    compile modules at first import (scripts/venv-install.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
EXTRAS=${SPU_EXTRAS:-all,dev}
STAMP=.venv/.spu-setup-$(sha256sum pyproject.toml | cut -c1-16)-${EXTRAS//,/-}

source scripts/venv-install.sh
if [ -f "$STAMP" ]; then
  venv_compiled .venv   # a venv set up lazily (scripts/test.sh) is compiled in full once, here
  exit 0
fi
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
venv_installer .venv
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    echo "setup: GPU found, installing torch with CUDA"
    venv_install "torch>=2.3"
  else
    # Pinned so the CPU build is taken where one is cached locally (PIP_FIND_LINKS); elsewhere point
    # SPU_TORCH_INDEX at a CPU wheel index to avoid the multi-GB CUDA build.
    echo "setup: no GPU, installing CPU torch==2.13.0"
    venv_install torch==2.13.0 ${SPU_TORCH_INDEX:+--index-url "$SPU_TORCH_INDEX"}
  fi
fi
echo "setup: installing spu-scaffold[$EXTRAS] (editable)"
venv_install -e ".[$EXTRAS]"
rm -f .venv/.spu-setup-*
venv_compiled .venv installed
touch "$STAMP"
echo "setup: done; the spu command is .venv/bin/spu"
