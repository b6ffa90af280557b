package toolset

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/internal/policy"
	"github.com/cortexfs/ctx/internal/stdtool"
)

// fakeBinary is a stand-in for ctxtools: a script answering --meta.
func fakeBinary(t *testing.T, version string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), Binary)
	script := "#!/bin/sh\n# " + version + "\n" +
		`[ "$1" = --meta ] && echo '[{"name":"read","meta":{"description":"Read a file.","provided_by":"ctx"}},{"name":"bash","meta":{"description":"Run bash.","provided_by":"ctx"}}]'` + "\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// spec: ctx init installs the toolset as tool objects, one inode
// linked under every name, each with its tool.json; a user's own tool of
// that name is kept; a newer binary replaces ours.
func TestInstall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tool")
	bin := fakeBinary(t, "v1")
	rep, err := Install(bin, dir)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rep.Installed, ",") != "bash,read" || len(rep.Kept) != 0 {
		t.Fatalf("report %+v", rep)
	}
	a, _ := os.Lstat(filepath.Join(dir, "read"))
	b, _ := os.Lstat(filepath.Join(dir, "bash"))
	if a == nil || b == nil || !os.SameFile(a, b) || !a.Mode().IsRegular() || a.Mode().Perm() != 0o755 {
		t.Fatalf("tools are not one regular executable: %v %v", a, b)
	}
	meta, _ := os.ReadFile(filepath.Join(dir, "read.d", "tool.json"))
	if string(meta) != `{"description":"Read a file.","provided_by":"ctx"}`+"\n" {
		t.Fatalf("tool.json %q", meta)
	}
	// again: nothing changes
	if rep, err := Install(bin, dir); err != nil || len(rep.Installed) != 2 {
		t.Fatalf("reinstall: %+v %v", rep, err)
	}
	// a user's own bash is kept
	os.Remove(filepath.Join(dir, "bash"))
	os.WriteFile(filepath.Join(dir, "bash"), []byte("#!/bin/sh\necho mine\n"), 0o755)
	os.WriteFile(filepath.Join(dir, "bash.d", "tool.json"), []byte(`{"description":"mine"}`), 0o644)
	bin2 := fakeBinary(t, "v2")
	rep, err = Install(bin2, dir)
	if err != nil || strings.Join(rep.Kept, ",") != "bash" || strings.Join(rep.Installed, ",") != "read" {
		t.Fatalf("upgrade with a user tool: %+v %v", rep, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "bash")); string(b) != "#!/bin/sh\necho mine\n" {
		t.Fatalf("the user's bash was replaced: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "read")); !strings.Contains(string(b), "v2") {
		t.Fatalf("read was not upgraded: %q", b)
	}
	// a binary that does not answer --meta installs nothing
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("#!/bin/sh\necho nope\n"), 0o755)
	if _, err := Install(bad, filepath.Join(t.TempDir(), "t2")); err == nil {
		t.Fatal("a binary without --meta was accepted")
	}
}

// spec: the names the default policy allows are the tools the
// binary holds.
func TestStandardIsTheToolset(t *testing.T) {
	var got []string
	for _, tl := range stdtool.Tools() {
		got = append(got, tl.Name)
	}
	if strings.Join(got, ",") != strings.Join(Standard, ",") {
		t.Fatalf("stdtool holds %v, toolset.Standard says %v", got, Standard)
	}
}

func TestDefaultPolicyParses(t *testing.T) {
	p := DefaultPolicy([]string{"clock", "bash"})
	pol, err := policy.Parse(policy.AgentPolicy, "policy", []byte(p))
	if err != nil {
		t.Fatalf("%v\n%s", err, p)
	}
	for _, n := range append(Standard, "agent.update", "clock") {
		if !allows(pol, n) {
			t.Errorf("%s not allowed", n)
		}
	}
	if allows(pol, "curl") {
		t.Error("curl allowed")
	}
}

func allows(p *policy.Policy, n string) bool { ok, _ := p.Match(n); return ok }

// TestInstallConcurrent: `ctx init` and the daemon's own install may run
// at once (seen: `rename …/tool/.glob.link …/glob: no such file or
// directory`); every installer succeeds and the result is whole.
func TestInstallConcurrent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tool")
	bins := []string{fakeBinary(t, "v1"), fakeBinary(t, "v2")}
	for round := range 20 {
		errs := make(chan error, 8)
		for i := range 8 {
			go func() {
				_, err := Install(bins[(i+round)%2], dir)
				errs <- err
			}()
		}
		for range 8 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		a, _ := os.Lstat(filepath.Join(dir, "read"))
		b, _ := os.Lstat(filepath.Join(dir, "bash"))
		m, _ := os.Stat(filepath.Join(dir, "."+Binary))
		if a == nil || b == nil || m == nil || !os.SameFile(a, b) || !os.SameFile(a, m) {
			t.Fatalf("round %d: the tools are not the one installed binary", round)
		}
	}
}
