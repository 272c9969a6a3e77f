#!/usr/bin/env bash
# Install the MCP clients the npm-marked tests drive, into a project-local prefix (.npm-clients/, git-ignored):
#   @anthropic-ai/claude-code  (claude)     @openai/codex  (codex)     @modelcontextprotocol/inspector
# Idempotent. Needs node >= 18 and npm. Pinned to the versions the tests were run with; override:
#   CLAUDE_CODE_VERSION=2.0.0 CODEX_VERSION=0.50.0 INSPECTOR_VERSION=0.17.0 bash scripts/install-npm-clients.sh
# Then: .venv/bin/pytest -m npm tests/integration   (docs/claude-code.md, docs/codex.md)
set -euo pipefail
cd "$(dirname "$0")/.."

PREFIX=${SPU_NPM_PREFIX:-.npm-clients}
PACKAGES=(
  "@anthropic-ai/claude-code@${CLAUDE_CODE_VERSION:-2.1.332}"
  "@openai/codex@${CODEX_VERSION:-0.171.0}"
  "@modelcontextprotocol/inspector@${INSPECTOR_VERSION:-2.12.0}"
)
if ! command -v npm >/dev/null 2>&1; then
  echo "install-npm-clients: npm not found; install Node.js 18 or newer first" >&2
  exit 2
fi
mkdir -p "$PREFIX"
# the prefix ignores itself (as a Python venv does), whatever the root .gitignore says
echo '*' > "$PREFIX/.gitignore"
# --prefix keeps everything out of the global node_modules; no audit/fund calls, no update notifier.
export NPM_CONFIG_UPDATE_NOTIFIER=false NPM_CONFIG_FUND=false NPM_CONFIG_AUDIT=false
npm install --prefix "$PREFIX" --no-save --loglevel=error --prefer-offline "${PACKAGES[@]}"   # the cache first
for bin in claude codex mcp-inspector; do
  if [ ! -x "$PREFIX/node_modules/.bin/$bin" ]; then
    echo "install-npm-clients: $bin missing from $PREFIX/node_modules/.bin" >&2
    exit 1
  fi
done
echo "install-npm-clients: done; binaries in $PREFIX/node_modules/.bin"
"$PREFIX/node_modules/.bin/claude" --version 2>/dev/null || true
"$PREFIX/node_modules/.bin/codex" --version 2>/dev/null || true
