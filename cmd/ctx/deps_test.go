package main

import (
	"flag"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite depaware.txt from go list")

// listDeps is `go list -deps` of the ctx client for one fixed target
// (linux/amd64, cgo off — what `make build` makes), so the list does not
// change with the machine or with -race's CGO_ENABLED=1.
func listDeps(t *testing.T) []string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies")
	}
	cmd := exec.Command(goBin, "list", "-deps", ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/ctx: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed too little to judge:\n%s", out)
	}
	sort.Strings(deps) // the set matters; go list's order moves with any import
	return deps
}

// TestClientStaysLight: the ctx client links none of the daemon's weight —
// the actor runtime, metrics, tracing, D-Bus — nor the daemon's own
// packages; ctxd has them. A ctx command starts in milliseconds and a
// client bug cannot reach the daemon's internals.
func TestClientStaysLight(t *testing.T) {
	forbidden := []string{
		"github.com/asynkron/protoactor-go",
		"github.com/prometheus/",
		"go.opentelemetry.io/otel",
		"github.com/godbus/dbus",
		"github.com/coreos/go-systemd/v22/dbus",
		"github.com/cortexfs/ctx/supervisor",
		"github.com/cortexfs/ctx/actors/",
		"github.com/cortexfs/ctx/internal/ctxd",
	}
	for _, d := range listDeps(t) {
		for _, f := range forbidden {
			if strings.HasPrefix(d, f) {
				t.Errorf("ctx links %s (forbidden: %s*): move what the client needs into a light package", d, f)
			}
		}
	}
}

// TestDepaware: depaware.txt is the committed list of every package the
// ctx client links (as tailscale's depaware.txt), so a change that pulls
// in a dependency shows in review. Update with
// `go test ./cmd/ctx -run TestDepaware -update`.
func TestDepaware(t *testing.T) {
	got := strings.Join(listDeps(t), "\n") + "\n"
	if *update {
		if err := os.WriteFile("depaware.txt", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile("depaware.txt")
	if err != nil {
		t.Fatalf("%v (create it: go test ./cmd/ctx -run TestDepaware -update)", err)
	}
	if string(want) == got {
		return
	}
	have := map[string]bool{}
	for _, d := range strings.Fields(string(want)) {
		have[d] = true
	}
	now := map[string]bool{}
	for _, d := range strings.Fields(got) {
		now[d] = true
		if !have[d] {
			t.Errorf("ctx now links %s", d)
		}
	}
	for d := range have {
		if !now[d] {
			t.Errorf("ctx no longer links %s", d)
		}
	}
	t.Errorf("cmd/ctx/depaware.txt is stale: review the change, then go test ./cmd/ctx -run TestDepaware -update")
}
