#!/bin/sh
# agent.sh — the tiny default front end. spec: S7 No protocol here:
# it resolves ctx and execs `ctx agent`.
#   agent.sh AGENT             -> ctx agent chat AGENT --session default
#   agent.sh AGENT INPUT...    -> ctx agent send AGENT --session default INPUT...
#   agent.sh --watch AGENT     -> ctx agent watch AGENT --session default
#   agent.sh --attach AGENT    -> ctx agent attach AGENT --session default
set -eu
ctx=${CTX_BIN:-}
if [ -z "$ctx" ]; then
  here=$(dirname "$0")
  if [ -x "$here/ctx" ]; then ctx="$here/ctx"; elif [ -x "$here/bin/ctx" ]; then ctx="$here/bin/ctx"; else ctx=$(command -v ctx) || { echo "agent.sh: ctx not found" >&2; exit 127; }; fi
fi
case "${1:-}" in
  "") echo "usage: agent.sh AGENT [INPUT...] | --watch AGENT | --attach AGENT" >&2; exit 2 ;;
  --watch) exec "$ctx" agent watch "$2" --session default ;;
  --attach) exec "$ctx" agent attach "$2" --session default ;;
esac
agent=$1; shift
if [ $# -eq 0 ]; then exec "$ctx" agent chat "$agent" --session default; fi
exec "$ctx" agent send "$agent" --session default "$@"
