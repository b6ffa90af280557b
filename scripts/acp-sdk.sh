#!/usr/bin/env bash
# acp-sdk.sh — install the official Agent Client Protocol TypeScript SDK
# from the npm registry into a cache directory, and print that
# directory. The directory is CTX_ACP_NPM_DIR, else /var/cache/ctx/acp for
# root, else $HOME/.cache/ctx-acp. A run with everything installed touches no
# network. e2e/acp_test.go looks in the same places and skips, saying so,
# when the SDK is absent.
set -euo pipefail
pkg=@agentclientprotocol/sdk
ver=2.4.0
if [ -n "${CTX_ACP_NPM_DIR:-}" ]; then dir=$CTX_ACP_NPM_DIR
elif [ "$(id -u)" = 0 ]; then dir=/var/cache/ctx/acp
else dir=$HOME/.cache/ctx-acp; fi
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "acp-sdk: installing nodejs and npm" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >&2
  else
    echo "acp-sdk: npm is missing; install Node.js (sudo apt-get install -y nodejs npm)" >&2
    exit 1
  fi
fi
mkdir -p "$dir"
if ! { [ -f "$dir/node_modules/$pkg/package.json" ] && grep -q "\"version\": \"$ver\"" "$dir/node_modules/$pkg/package.json"; }; then
  echo "acp-sdk: npm install $pkg@$ver into $dir" >&2
  npm install --no-audit --no-fund --silent --prefix "$dir" "$pkg@$ver" >&2
fi
echo "$dir"
