#!/usr/bin/env bash
# Install the headless Chromium the browser tests (tests/view/) drive, from the distribution's packages.
# Playwright cannot download its own browsers here, so the tests point it at this system Chromium.
# Idempotent; never fails the caller: where apt-get or root is missing it says so and the browser
# tests skip with the same message.
set -uo pipefail

for name in chromium chromium-browser google-chrome; do
  if command -v "$name" >/dev/null 2>&1; then
    exit 0
  fi
done
if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup-browser: no apt-get on this machine; install Chromium by hand for the browser tests (they skip without it)" >&2
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
  else
    echo "setup-browser: not root and no password-less sudo; run 'apt-get install -y chromium' as root for the browser tests (they skip without it)" >&2
    exit 0
  fi
fi
echo "setup-browser: installing chromium with apt-get"
if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null; }; then
  echo "setup-browser: apt-get could not install chromium; the browser tests will skip" >&2
fi
exit 0
