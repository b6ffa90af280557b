#!/usr/bin/env bash
# mcp-servers.sh — install the real MCP servers the e2e tests drive
# from the npm registry into a cache directory, and print that directory.
# The directory is CTX_MCP_NPM_DIR, else /var/cache/ctx/npm for root, else
# $HOME/.cache/ctx-npm. A run with everything installed touches no network.
# e2e/mcp_test.go looks in the same places and skips, saying so, when the
# servers are absent.
set -euo pipefail
pkgs=(
  @modelcontextprotocol/server-everything@2026.8.31
  @modelcontextprotocol/server-filesystem@2026.8.31
  @modelcontextprotocol/server-memory@2026.8.31
)
if [ -n "${CTX_MCP_NPM_DIR:-}" ]; then dir=$CTX_MCP_NPM_DIR
elif [ "$(id -u)" = 0 ]; then dir=/var/cache/ctx/npm
else dir=$HOME/.cache/ctx-npm; fi
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "mcp-servers: installing nodejs and npm" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >&2
  else
    echo "mcp-servers: npm is missing; install Node.js (sudo apt-get install -y nodejs npm)" >&2
    exit 1
  fi
fi
mkdir -p "$dir"
ok=1
for p in "${pkgs[@]}"; do
  name=${p%@*}
  bin=$dir/node_modules/.bin/mcp-${name#@modelcontextprotocol/}
  [ -x "$bin" ] || ok=0
  # the pinned version must be the installed one
  [ -f "$dir/node_modules/$name/package.json" ] && grep -q "\"version\": \"${p##*@}\"" "$dir/node_modules/$name/package.json" || ok=0
done
if [ $ok = 0 ]; then
  echo "mcp-servers: npm install into $dir" >&2
  npm install --no-audit --no-fund --silent --prefix "$dir" "${pkgs[@]}" >&2
fi
echo "$dir"
