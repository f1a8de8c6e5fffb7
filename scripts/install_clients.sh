#!/usr/bin/env bash
# Install the real agent CLIs the proxy's live tests drive, at pinned versions, into
# .clients/ (or $CONTEXTLEDGER_CLIENTS_DIR): node_modules/.bin/claude and .../codex.
# Without node/npm it says so and exits 0 (the live tests then skip on a laptop and fail
# in CI, where CI=true).
set -euo pipefail
cd "$(dirname "$0")/.."
CLAUDE_CODE_VERSION="${CLAUDE_CODE_VERSION:-2.1.197}"
CODEX_VERSION="${CODEX_VERSION:-0.171.0}"
DIR="${CONTEXTLEDGER_CLIENTS_DIR:-$PWD/.clients}"
if ! command -v npm >/dev/null 2>&1; then
  echo "install_clients: npm not found; the live client tests will skip (fail with CI=true)" >&2
  exit 0
fi
STAMP="$DIR/.installed-$CLAUDE_CODE_VERSION-$CODEX_VERSION"
if [ -f "$STAMP" ] && [ -x "$DIR/node_modules/.bin/claude" ] && [ -x "$DIR/node_modules/.bin/codex" ]; then
  exit 0
fi
mkdir -p "$DIR"
[ -f "$DIR/package.json" ] || echo '{"private": true}' > "$DIR/package.json"
npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error \
  "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@openai/codex@$CODEX_VERSION"
touch "$STAMP"
