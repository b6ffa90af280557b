#!/usr/bin/env bash
# deps.sh demo|test — make sure what `make demo` or `make test` needs is on
# the machine. Missing packages are installed with apt-get when run as root;
# otherwise it stops at once with the one command to run.
set -euo pipefail
# nsenter (util-linux) puts an unprivileged daemon's netns helper into a
# net sandbox's namespaces (internal/egress).
want=(bubblewrap:/usr/bin/bwrap git:git util-linux:/usr/bin/nsenter)
if [ "${1:-}" = test ]; then
  # tmux drives `ctx agent attach`; setpriv/unshare (util-linux), pgrep
  # (procps) and useradd (passwd) serve the uid tests; rg is the grep
  # benchmark's baseline; Debian's python3 (3.11: PYTHONSAFEPATH) runs the
  # Python MCP servers of e2e/security_host_mcp_test.go.
  want+=(tmux:tmux util-linux:setpriv procps:pgrep passwd:useradd ripgrep:rg ca-certificates:/etc/ssl/certs python3:/usr/bin/python3)
fi
missing=()
for w in "${want[@]}"; do
  pkg=${w%%:*} what=${w#*:}
  if [[ $what == /* ]]; then [ -e "$what" ] && continue; else command -v "$what" >/dev/null 2>&1 && continue; fi
  missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
  exit 0
fi
echo "deps: missing ${missing[*]}; install them with:" >&2
echo "  sudo apt-get install -y ${missing[*]}" >&2
exit 1
