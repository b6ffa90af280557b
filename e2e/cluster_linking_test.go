package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// clusterOnly are the modules and packages only ctx-cluster may link
// (docs/cluster.md "Parts and packages"): etcd, gRPC, protoactor's remote
// and cluster, and ctx's own cluster code.
var clusterOnly = []string{
	"go.etcd.io/",
	"google.golang.org/grpc",
	"github.com/asynkron/protoactor-go/remote",
	"github.com/asynkron/protoactor-go/cluster",
	"github.com/cortexfs/ctx/cluster.",
	"github.com/cortexfs/ctx/cluster/",
	"github.com/cortexfs/ctx/internal/clusterconf",
	"github.com/cortexfs/ctx/internal/clustercert",
	"github.com/cortexfs/ctx/internal/fence",
}

// goTool runs `go ARGS…` and returns its output.
func goTool(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// TestDefaultBinariesLinkNoClusterCode: interfaces.md Cluster — the
// default ctx and ctxd link no etcd, gRPC or protoactor remote/cluster
// code: `go version -m` lists no such module and the symbol table holds
// no such symbol (nor any of ctx's own cluster packages). Each check is
// first shown able to see what it looks for: a module both binaries do
// link, protoactor's actor package in ctxd, the cluster packages in
// ctx-cluster, which must build.
func TestDefaultBinariesLinkNoClusterCode(t *testing.T) {
	for _, name := range []string{"ctx", "ctxd"} {
		bin := filepath.Join(binDir, name)
		mods := goTool(t, "version", "-m", bin)
		if !strings.Contains(mods, "\tdep\tgithub.com/alecthomas/kong\t") && name == "ctx" {
			t.Fatalf("go version -m %s lists no kong: cannot judge its modules:\n%s", name, mods)
		}
		for _, l := range strings.Split(mods, "\n") {
			f := strings.Fields(l)
			if len(f) < 2 || (f[0] != "dep" && f[0] != "=>") {
				continue
			}
			for _, bad := range []string{"go.etcd.io/", "google.golang.org/grpc"} {
				if strings.HasPrefix(f[1], bad) {
					t.Errorf("%s links module %s", name, f[1])
				}
			}
		}

		syms := goTool(t, "tool", "nm", bin)
		if !strings.Contains(syms, "github.com/cortexfs/ctx/internal/layout.") {
			t.Fatalf("go tool nm %s shows no ctx symbol: cannot judge its symbols", name)
		}
		if name == "ctxd" && !strings.Contains(syms, "github.com/asynkron/protoactor-go/actor.") {
			t.Fatal("go tool nm ctxd shows no protoactor actor symbol: cannot judge protoactor's packages")
		}
		for _, bad := range clusterOnly {
			if i := strings.Index(syms, bad); i >= 0 {
				line := syms[i:]
				if j := strings.IndexByte(line, '\n'); j >= 0 {
					line = line[:j]
				}
				t.Errorf("%s links %s (symbol %s)", name, bad, line)
			}
		}
	}

	cc := filepath.Join(binDir, "ctx-cluster")
	out, err := exec.Command(cc, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "ctx-cluster ") {
		t.Fatalf("ctx-cluster --version: %q %v", out, err)
	}
	syms := goTool(t, "tool", "nm", cc)
	for _, want := range []string{"github.com/cortexfs/ctx/internal/clustercert.", "github.com/cortexfs/ctx/cluster."} {
		if !strings.Contains(syms, want) {
			t.Errorf("ctx-cluster has no %s symbol: the check above would not see cluster code", want)
		}
	}
	if st, err := os.Stat(cc); err != nil || st.Mode()&0o111 == 0 {
		t.Errorf("ctx-cluster is not an executable: %v", err)
	}
}
