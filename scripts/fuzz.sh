#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (default 10s).
# With --keep, the inputs that gave new coverage (Go's fuzz cache) are
# copied into the package's testdata/fuzz/<Target>/ (at most 40 a target),
# so `go test` replays them forever; a crasher is written there by go test
# itself and fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
keep=0
[ "${1:-}" = "--keep" ] && keep=1
cache=$($GO env GOCACHE)/fuzz
module=$($GO list -m)
targets=0
for pkg in $($GO list ./...); do
  dir=$($GO list -f '{{.Dir}}' "$pkg")
  grep -qs '^func Fuzz' "$dir"/*_test.go || continue
  for f in $($GO test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "== $pkg $f ($FUZZTIME)"
    $GO test -run '^$' -fuzz "^$f\$" -fuzztime "$FUZZTIME" "$pkg"
    targets=$((targets + 1))
    if [ $keep = 1 ] && [ -d "$cache/$pkg/$f" ]; then
      mkdir -p "$dir/testdata/fuzz/$f"
      ls -t "$cache/$pkg/$f" | head -40 | while read -r c; do cp -n "$cache/$pkg/$f/$c" "$dir/testdata/fuzz/$f/"; done
    fi
  done
done
echo "fuzzed $targets targets of $module for $FUZZTIME each"
