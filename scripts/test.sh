#!/usr/bin/env bash
# Set up .venv if needed, then run the test suite. Extra arguments go to pytest (e.g. -m "not slow").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
set +e
.venv/bin/python -m pytest "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "test: pytest collected no tests; that is a failure here" >&2
  exit 1
fi
exit "$status"
