#!/usr/bin/env bash
# Create .harbor-venv: Harbor (needs Python >= 3.12) beside the project's own .venv, so the Harbor export
# can be checked by Harbor's own models and `harbor` CLI, and `harbor run` can import scaffold.harbor_agent.
# Idempotent; installs with uv as setup.sh does (scripts/venv-install.sh).
#   PYTHON=python3.13 bash scripts/setup-harbor.sh     choose the interpreter
#   HARBOR_VERSION=0.25.0                              the Harbor release to install
set -euo pipefail
cd "$(dirname "$0")/.."

# The first interpreter that runs and is >= 3.12 (a pyenv shim can exist without a selected version).
find_python() {
  local candidate
  for candidate in python3.12 python3.13 python3.14 python3; do
    if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then
      command -v "$candidate"
      return
    fi
  done
  if command -v pyenv >/dev/null 2>&1; then
    for candidate in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.(1[2-9])' | sort -rV); do
      echo "$(pyenv root)/versions/$candidate/bin/python3"
      return
    done
  fi
  echo python3.12
}
PYTHON=${PYTHON:-$(find_python)}
HARBOR_VERSION=${HARBOR_VERSION:-0.25.0}
STAMP=.harbor-venv/.spu-harbor-$HARBOR_VERSION

source scripts/venv-install.sh
if [ -f "$STAMP" ]; then
  venv_compiled .harbor-venv   # compiled in full once where scripts/test.sh set it up lazily
  exit 0
fi
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then
  echo "setup-harbor: Harbor needs Python >= 3.12; $PYTHON is $("$PYTHON" --version 2>&1)" >&2
  exit 2
fi
if [ ! -x .harbor-venv/bin/python ]; then
  echo "setup-harbor: creating .harbor-venv with $("$PYTHON" --version)"
  "$PYTHON" -m venv .harbor-venv
fi
venv_installer .harbor-venv
venv_install "harbor==$HARBOR_VERSION"
rm -f .harbor-venv/.spu-harbor-*
venv_compiled .harbor-venv installed
touch "$STAMP"
echo "setup-harbor: done; .harbor-venv/bin/harbor $(HARBOR_TELEMETRY=0 .harbor-venv/bin/harbor --version 2>/dev/null || true)"
echo "setup-harbor: set HARBOR_TELEMETRY=0 to keep Harbor from sending usage events"
