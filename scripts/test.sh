#!/usr/bin/env bash
# The README's test command: set up everything the tests use, then run the whole suite.
#   .venv (all engines and test tools), .harbor-venv (Harbor, Python >= 3.12), .npm-clients (Claude Code,
#   Codex, MCP Inspector), Chromium (apt, for the browser tests), Docker with the Compose plugin (as root:
#   scripts/setup-docker.sh, for tests/container); each step is idempotent and fast once done.
# Extra arguments go to pytest (e.g. -m "not slow and not container", tests/core). SPU_TEST_SETUP=venv skips
# the clients, Harbor and Docker (their tests then skip, saying why) for a quick local run; SPU_TEST_DOCKER=0
# skips only Docker. Where Docker was set up, the container tests must run (SPU_REQUIRE_CONTAINER=1).
set -euo pipefail
cd "$(dirname "$0")/.."
export HARBOR_TELEMETRY=0
bash scripts/setup.sh
if [ "${SPU_TEST_SETUP:-all}" != "venv" ]; then
  bash scripts/setup-harbor.sh
  bash scripts/install-npm-clients.sh
  bash scripts/setup-browser.sh   # headless Chromium from apt for tests/view (they skip without it)
  if [ "${SPU_TEST_DOCKER:-1}" != "0" ]; then
    if [ "$(id -u)" = "0" ]; then
      bash scripts/setup-docker.sh   # engine, dockerd, compose v2, base image (tests/container)
      export SPU_REQUIRE_CONTAINER=1
    else
      echo "test: not root, so Docker is not set up here; tests/container will skip" >&2
    fi
  fi
fi
set +e
.venv/bin/python -m pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "test: pytest collected no tests; that is a failure here" >&2
  exit 1
fi
exit "$status"
