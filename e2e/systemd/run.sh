#!/usr/bin/env bash
# make test-systemd: the systemd launcher and socket activation of the
# daemon (ctx install-units) against a real systemd user manager. This
# machine's PID 1 is not systemd, so a debootstrap'ed Debian (cached) is
# booted with systemd-nspawn and the test binary runs inside it as a
# lingering user, talking to that user's manager over D-Bus; the ctx
# binaries it drives are bind-mounted at /ctxtest.
# Skips (exit 0, with the reason) when it cannot run here; set
# CTX_SYSTEMD_REQUIRED=1 to make that a failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
CACHE=${CTX_SYSTEMD_CACHE:-/var/cache/ctx/bookworm-systemd}
MIRROR=${CTX_DEBIAN_MIRROR:-http://deb.debian.org/debian}
TUSER=ctxtest
TUID=4242

skip() {
	echo "test-systemd: SKIP: $*"
	[ "${CTX_SYSTEMD_REQUIRED:-0}" = 1 ] && exit 1
	exit 0
}
[ "$(id -u)" = 0 ] || skip "needs root (systemd-nspawn)"
command -v systemd-nspawn >/dev/null || skip "systemd-nspawn missing (apt-get install systemd-container)"
command -v debootstrap >/dev/null || skip "debootstrap missing (apt-get install debootstrap)"
command -v nsenter >/dev/null && command -v setpriv >/dev/null || skip "nsenter/setpriv missing (util-linux)"

if [ ! -x "$CACHE/usr/lib/systemd/systemd" ]; then
	rm -rf "$CACHE.tmp"
	mkdir -p "$(dirname "$CACHE")"
	if ! debootstrap --variant=minbase \
		--include=systemd,systemd-sysv,dbus,dbus-user-session,libpam-systemd,procps,bubblewrap \
		bookworm "$CACHE.tmp" "$MIRROR" >"$CACHE.log" 2>&1; then
		tail -5 "$CACHE.log"
		skip "debootstrap from $MIRROR failed (log: $CACHE.log)"
	fi
	mv "$CACHE.tmp" "$CACHE"
fi
# The lingering test user: its manager starts at boot.
if ! grep -q "^$TUSER:" "$CACHE/etc/passwd"; then
	chroot "$CACHE" useradd -m -u "$TUID" -s /bin/sh "$TUSER"
fi
# bwrap, for the sandboxed tool call of TestSocketActivation (a cached root
# from before that test lacks it). Without it the test skips that step.
if [ ! -x "$CACHE/usr/bin/bwrap" ]; then
	if ! chroot "$CACHE" sh -c 'DEBIAN_FRONTEND=noninteractive apt-get -qq update &&
		DEBIAN_FRONTEND=noninteractive apt-get -qq install -y --no-install-recommends bubblewrap' >"$CACHE.bwrap.log" 2>&1; then
		echo "test-systemd: could not install bubblewrap into $CACHE (log: $CACHE.bwrap.log)"
	fi
fi
mkdir -p "$CACHE/var/lib/systemd/linger"
touch "$CACHE/var/lib/systemd/linger/$TUSER"

WORK=$(mktemp -d /tmp/ctx-systemd.XXXXXX)
chmod 755 "$WORK"
CGO_ENABLED=0 go test -c -o "$WORK/systemd.test" ./e2e/systemd/
# The ctx binaries and the clock tool, for TestSocketActivation.
CGO_ENABLED=0 go build -o "$WORK/" ./cmd/ctx ./cmd/ctxd ./cmd/ctxterm ./cmd/tsh ./cmd/agent.update ./examples/demo-agent
cp -r examples/tools/clock examples/tools/clock.d "$WORK/"
chmod -R a+rX "$WORK"

# nspawn in a cgroup of its own, else it creates its cgroups at the host's root.
CG=""
for h in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified /sys/fs/cgroup; do
	if [ -w "$h" ] && [ -e "$h/cgroup.procs" ]; then CG="$h/ctx-nspawn-$$"; break; fi
done
cleanup() {
	[ -n "${NSPAWN:-}" ] && kill -TERM "$NSPAWN" 2>/dev/null && wait "$NSPAWN" 2>/dev/null || true
	[ -n "$CG" ] && rmdir "$CG" 2>/dev/null || true
	rm -rf "$WORK"
}
trap cleanup EXIT
(
	if [ -n "$CG" ]; then mkdir -p "$CG" && echo $BASHPID >"$CG/cgroup.procs"; fi
	exec systemd-nspawn -q -D "$CACHE" -b --register=no --keep-unit \
		--bind-ro="$WORK:/ctxtest" -M "ctxsd$$" >"$WORK/console.log" 2>&1
) &
NSPAWN=$!

PID1=""
for _ in $(seq 1 200); do
	PID1=$(cat "/proc/$NSPAWN/task/$NSPAWN/children" 2>/dev/null | awk '{print $1}')
	if [ -n "$PID1" ] && nsenter -t "$PID1" -a test -S "/run/user/$TUID/bus" 2>/dev/null; then break; fi
	kill -0 "$NSPAWN" 2>/dev/null || { cat "$WORK/console.log"; skip "systemd-nspawn exited before the user manager came up"; }
	sleep 0.1
done
nsenter -t "$PID1" -a test -S "/run/user/$TUID/bus" || { tail -20 "$WORK/console.log"; skip "the user manager of $TUSER did not come up"; }

nsenter -t "$PID1" -a setpriv --reuid="$TUID" --regid="$TUID" --init-groups \
	env -i HOME=/home/$TUSER XDG_RUNTIME_DIR=/run/user/$TUID \
	DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/$TUID/bus PATH=/usr/bin:/bin \
	CTX_SYSTEMD_INNER=1 /ctxtest/systemd.test -test.v -test.count=1
