#!/usr/bin/env bash
# The README's test command: set up everything the tests use, then run the whole suite.
#   .venv (all engines and test tools), .harbor-venv (Harbor, Python >= 3.12), .npm-clients (Claude Code,
#   Codex, MCP Inspector), Chromium (apt, for the browser tests); each step is idempotent and fast once done.
# Extra arguments go to pytest (e.g. -m "not slow", tests/core). SPU_TEST_SETUP=venv skips the clients and
# Harbor (their tests then skip, saying why) for a quick local run.
set -euo pipefail
cd "$(dirname "$0")/.."
export HARBOR_TELEMETRY=0
bash scripts/setup.sh
if [ "${SPU_TEST_SETUP:-all}" != "venv" ]; then
  bash scripts/setup-harbor.sh
  bash scripts/install-npm-clients.sh
  bash scripts/setup-browser.sh   # headless Chromium from apt for tests/view (they skip without it)
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
