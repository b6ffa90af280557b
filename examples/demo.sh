#!/usr/bin/env bash
# The demo: a fresh CTX_ROOT, the clock tool, the demo agent and one question,
# end to end through the daemon, the session log and the bwrap sandbox.
# No API key needed.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -x /usr/bin/bwrap ]; then
  echo "demo: bubblewrap is needed (every agent and tool runs in it): sudo apt-get install bubblewrap" >&2
  exit 1
fi
ctx="$here/bin/ctx"
demo=$(mktemp -d /tmp/ctx-demo.XXXXXX)
export CTX_ROOT="$demo/root" CTX_RUNTIME_DIR="$demo/run"
cleanup() {
  if [ -n "${daemon:-}" ]; then kill -TERM "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
}
trap cleanup EXIT

echo "== CTX_ROOT=$CTX_ROOT"
"$ctx" init
mkdir -p "$CTX_ROOT/tool"
cp -r "$here/examples/tools/clock" "$here/examples/tools/clock.d" "$CTX_ROOT/tool/"
"$ctx" daemon 2>"$demo/daemon.log" &
daemon=$!
for _ in $(seq 100); do [ -S "$CTX_RUNTIME_DIR/system.sock" ] && break; sleep 0.05; done
"$ctx" agent create demo --exec "$here/bin/demo-agent"
echo
echo '$ ctx agent send demo "what time is it?"'
"$ctx" agent send demo "what time is it?"
echo
echo '$ ctx agent send demo "thanks!"'
"$ctx" agent send demo "thanks!"
echo
echo '== the durable session log (events.jsonl):'
cat "$CTX_ROOT/home/$(id -u)/agent/demo/session/default/events.jsonl"
echo
echo "== tsh call clock was authorized by the host (every layer) and ran in the bwrap sandbox; the daemon log is $demo/daemon.log"
