#!/usr/bin/env bash
# The README's test command: set up everything the tests use, then run the whole suite.
#   .venv (all engines and test tools), .harbor-venv (Harbor, Python >= 3.12), .npm-clients (Claude Code,
#   Codex, MCP Inspector), Chromium (apt, for the browser tests), Docker with the Compose plugin (as root:
#   scripts/setup-docker.sh, for tests/container); each step is idempotent and fast once done, and the first
#   three run side by side.
# Without arguments: the whole suite, everything but the container tests in SPU_TEST_JOBS processes
# (pytest-xdist, default one more than the cores, at most 8, and 1 on one core; a file's tests stay in one
# process), and
# beside them, in one more process, the container tests (each session owns its Docker objects: tests/container/conftest.py), whose
# output is printed once both are done; the exit status is the worse of the two, and a part that collects
# no tests fails. With arguments, one plain pytest run with them (e.g. -m "not slow",
# the quick subset of docs/testing.md; tests/core; add -n 2 to spread it). SPU_TEST_SETUP=venv skips the
# clients, Harbor and Docker (their tests then skip, saying why) for a quick local run; SPU_TEST_DOCKER=0 skips
# only Docker. Where Docker was set up, the container tests must run (SPU_REQUIRE_CONTAINER=1).
set -euo pipefail
cd "$(dirname "$0")/.."
export HARBOR_TELEMETRY=0
# The suite starts hundreds of Python processes (servers, workers, CLIs): let them keep the bytecode they
# compile (the project's modules, pytest's rewritten tests, the engines') instead of compiling every
# import again in every process, as PYTHONDONTWRITEBYTECODE=1 would have them do. So the venvs are set up
# without compiling every installed module (33 of setup.sh's 38 s on 2 cores; the suite imports about a
# third of them): the suite compiles what it imports, once, and scripts/setup.sh compiles the rest when it
# next runs outside this script (scripts/venv-install.sh; SPU_COMPILE_BYTECODE=now compiles at install).
unset PYTHONDONTWRITEBYTECODE
export SPU_COMPILE_BYTECODE=${SPU_COMPILE_BYTECODE:-lazy}
# The set-up steps touch different folders, so the venvs and the npm clients install side by side, each
# logging to a file printed when all are done; the apt steps (Chromium, Docker) run one after the other.
setup_logs=$(mktemp -d -t spu-setup.XXXXXX)
trap 'rm -rf "$setup_logs"' EXIT   # also when an apt step fails under set -e
setup_pids=()
beside() {
  bash "scripts/$1.sh" >"$setup_logs/$1" 2>&1 &
  setup_pids+=("$!:$1")
}
beside setup
if [ "${SPU_TEST_SETUP:-all}" != "venv" ]; then
  beside setup-harbor
  beside install-npm-clients
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
setup_failed=0
for entry in "${setup_pids[@]}"; do
  step_status=0
  wait "${entry%%:*}" || step_status=$?
  cat "$setup_logs/${entry#*:}"
  if [ "$step_status" -ne 0 ]; then
    echo "test: scripts/${entry#*:}.sh failed (exit $step_status)" >&2
    setup_failed=1
  fi
done
rm -rf "$setup_logs"
[ "$setup_failed" -eq 0 ] || exit 1
run() {
  local status=0
  .venv/bin/python -m pytest "$@" || status=$?
  if [ "$status" -eq 5 ]; then
    echo "test: pytest collected no tests; that is a failure here" >&2
    return 1
  fi
  return "$status"
}
status=0
if [ "$#" -gt 0 ]; then
  run "$@" || status=$?
  exit "$status"
fi
container_log=$(mktemp -t spu-container-tests.XXXXXX)
run -m container tests/container >"$container_log" 2>&1 &
container_pid=$!
trap 'kill "$container_pid" 2>/dev/null || true; rm -f "$container_log"' EXIT
# One more process than the cores (at most 8; 1 on one core): the tests wait on their servers, clients and
# engines' processes part of the time, and a third process on 2 cores fills it (docs/testing.md has the
# runs). nproc counts the cores this process may use; it would also obey OMP_NUM_THREADS, which a user's
# shell may set.
cores=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)
default_jobs=$(( cores > 1 ? cores + 1 : 1 ))
jobs="${SPU_TEST_JOBS:-$(( default_jobs > 8 ? 8 : default_jobs ))}"
if [ "$jobs" -gt 1 ]; then
  run -n "$jobs" --dist loadfile -m "not container" || status=$?
else
  run -m "not container" || status=$?
fi
container_status=0
wait "$container_pid" || container_status=$?
echo "test: the container tests (tests/container), run beside the rest:"
cat "$container_log"
[ "$container_status" -gt "$status" ] && status=$container_status
exit "$status"
