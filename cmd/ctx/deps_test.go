package main

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestClientStaysLight: the ctx client links none of the daemon's weight —
// the actor runtime, metrics, tracing, D-Bus — nor the daemon's own
// packages; ctxd has them. spec: issue 15 (item 4)
func TestClientStaysLight(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(goBin); err != nil {
		if goBin, err = exec.LookPath("go"); err != nil {
			t.Skip("no go command to list dependencies")
		}
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/ctx: %v", err)
	}
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
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps printed too little to judge:\n%s", out)
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(d, f) {
				t.Errorf("ctx links %s (forbidden: %s*): move what the client needs into a light package", d, f)
			}
		}
	}
}
