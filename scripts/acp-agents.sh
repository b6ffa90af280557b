#!/usr/bin/env bash
# acp-agents.sh — install the real ACP clients and agents the e2e tests run
# ctx with, pinned, from the npm registry into a cache directory, and print
# that directory:
#   acpx                            a headless ACP client: drives `ctx acp`
#   opencode-ai                     `opencode acp`, an acp-v1 agent under ctx
#   @zed-industries/claude-code-acp Claude Code's ACP adapter, an acp-v1 agent
# The directory is CTX_AGENTS_NPM_DIR, else /var/cache/ctx/agents for root,
# else $HOME/.cache/ctx-agents. A run with everything installed touches no
# network. The e2e tests look in the same places; they skip, saying so, when
# a package is absent — and fail instead under CI=true.
set -euo pipefail
pkgs=(
  acpx@0.19.1
  opencode-ai@1.18.33
  @zed-industries/claude-code-acp@0.16.2
)
if [ -n "${CTX_AGENTS_NPM_DIR:-}" ]; then dir=$CTX_AGENTS_NPM_DIR
elif [ "$(id -u)" = 0 ]; then dir=/var/cache/ctx/agents
else dir=$HOME/.cache/ctx-agents; fi
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "acp-agents: installing nodejs and npm" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >&2
  else
    echo "acp-agents: npm is missing; install Node.js (sudo apt-get install -y nodejs npm)" >&2
    exit 1
  fi
fi
mkdir -p "$dir"
ok=1
for p in "${pkgs[@]}"; do
  name=${p%@*}
  f=$dir/node_modules/$name/package.json
  { [ -f "$f" ] && grep -q "\"version\": \"${p##*@}\"" "$f"; } || ok=0
done
# opencode-ai's postinstall fetches its platform binary as another npm package.
[ -x "$dir/node_modules/.bin/opencode" ] || ok=0
if [ $ok = 0 ]; then
  echo "acp-agents: npm install into $dir" >&2
  # --foreground-scripts: opencode-ai's postinstall must run (it links the binary).
  npm install --no-audit --no-fund --silent --foreground-scripts --prefix "$dir" "${pkgs[@]}" >&2
fi
for b in acpx opencode claude-code-acp; do
  [ -x "$dir/node_modules/.bin/$b" ] || { echo "acp-agents: $b missing after install in $dir" >&2; exit 1; }
done
echo "$dir"
