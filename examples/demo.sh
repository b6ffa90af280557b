#!/usr/bin/env bash
# The demo: a fresh CTX_ROOT, a throw-away git repository whose
# test fails, and a scripted agent (examples/fixer-agent — no model, no API
# key) that finds and fixes the bug with the standard tools bash, grep, read
# and edit: every step a real tool call through tsh, the authority layers and
# the bwrap sandbox, recorded in the session's events.jsonl.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bash "$here/scripts/deps.sh" demo
ctx="$here/bin/ctx"
demo=$(mktemp -d /tmp/ctx-demo.XXXXXX)
export CTX_ROOT="$demo/root" CTX_RUNTIME_DIR="$demo/run"
cleanup() {
  if [ -n "${daemon:-}" ]; then kill -TERM "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
}
trap cleanup EXIT

echo "== CTX_ROOT=$CTX_ROOT"
"$ctx" init

# The repository: add() subtracts, and its test says so.
repo="$demo/repo"
mkdir -p "$repo"
cat >"$repo/calc.sh" <<'SH'
# calc.sh: small arithmetic helpers.
add() {
	echo $(( $1 - $2 ))
}
SH
cat >"$repo/test.sh" <<'SH'
#!/bin/sh
. ./calc.sh
got=$(add 2 3)
if [ "$got" = 5 ]; then echo "PASS add 2 3 = 5"; else echo "FAIL add 2 3: got $got, want 5"; exit 1; fi
SH
git -C "$repo" init -q
git -C "$repo" -c user.name=demo -c user.email=demo@example.invalid add .
git -C "$repo" -c user.name=demo -c user.email=demo@example.invalid commit -qm "calc with a failing test"
echo "== the repository $repo: sh test.sh fails"
(cd "$repo" && sh test.sh) || true

"$ctx" daemon 2>"$demo/daemon.log" &
daemon=$!
for _ in $(seq 100); do [ -S "$CTX_RUNTIME_DIR/system.sock" ] && break; sleep 0.05; done
"$ctx" agent create coder --exec "$here/bin/fixer-agent"
echo
echo '$ cd repo && ctx agent send coder "the test fails; find the bug and fix it"'
(cd "$repo" && "$ctx" agent send coder "the test fails; find the bug and fix it")
echo
echo '== git diff (the change the agent made in its sandbox):'
git -C "$repo" --no-pager diff
echo '== sh test.sh on the host:'
(cd "$repo" && sh test.sh)
echo
echo '== the tool calls in the durable session log (events.jsonl):'
grep -E '"type":"(tool_call|tool_result)"' "$CTX_ROOT/home/$(id -u)/agent/coder/session/default/events.jsonl" | cut -c1-200
echo
echo "== each call was authorized by the host (every layer) and ran in the bwrap sandbox; the daemon log is $demo/daemon.log"
