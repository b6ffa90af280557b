package etcdtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestOnlyTestsLinkTheEtcdServer: the etcd server is imported by this
// package alone, and this package only by tests and the test-only
// cmd/ctx-etcd-test, so no shipped binary (ctx-cluster included) carries
// an etcd server.
func TestOnlyTestsLinkTheEtcdServer(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list packages")
	}
	cmd := exec.Command(goBin, "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "github.com/cortexfs/ctx/...")
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const self = "github.com/cortexfs/ctx/internal/etcdtest"
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) < 20 {
		t.Fatalf("go list printed too little to judge:\n%s", out)
	}
	for _, line := range lines {
		f := strings.Fields(line)
		pkg, imports := f[0], f[1:]
		for _, imp := range imports {
			switch {
			case strings.HasPrefix(imp, "go.etcd.io/etcd/server/") && pkg != self:
				t.Errorf("%s imports %s: only internal/etcdtest may link the etcd server", pkg, imp)
			case imp == self && pkg != "github.com/cortexfs/ctx/cmd/ctx-etcd-test":
				t.Errorf("%s imports internal/etcdtest outside its tests", pkg)
			}
		}
	}
}
