package workspace

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/internal/layout"
)

// plant makes n directories each holding an empty .envrc (a protected
// name) and a nested repository below them all, reached last by the
// breadth-first walk.
func plant(t *testing.T, n int) string {
	t.Helper()
	ws := t.TempDir()
	for i := 0; i < n; i++ {
		d := filepath.Join(ws, "d"+strconv.Itoa(i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, ".envrc"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(ws, "nested/repo/.git/hooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(ws, "nested/repo/.git/HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
	return ws
}

// Protection fails closed: a walk cut short by a bound makes the
// directory read-only, unless `partial DIR` names it; the warning names
// that grant with the directory's real path.
func TestProtectFailsClosed(t *testing.T) {
	for _, c := range []struct {
		name     string
		n        int
		grant    func(ws string) string
		readOnly bool
	}{
		{"within the bounds", 10, nil, false},
		{"past MaxProtected", MaxProtected + 6, nil, true},
		{"past MaxProtected, granted", MaxProtected + 6, func(ws string) string { return "partial " + ws + "\n" }, false},
		{"past MaxProtected, another dir granted", MaxProtected + 6, func(string) string { return "partial /tmp\n" }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := plant(t, c.n)
			real, _ := filepath.EvalSymlinks(ws)
			var g Grants
			if c.grant != nil {
				var err error
				if g, err = ParseGrants([]byte(c.grant(real))); err != nil {
					t.Fatal(err)
				}
			}
			d, err := Open(ws, Options{Homes: []string{}})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			p := Protect(d, g)
			if p.ReadOnly != c.readOnly {
				t.Fatalf("ReadOnly = %v (truncated %q, granted %q), want %v", p.ReadOnly, p.Truncated, p.Granted, c.readOnly)
			}
			w := p.Warning(d, "/workspace", "a")
			if c.readOnly != (w != "") {
				t.Fatalf("warning %q", w)
			}
			if c.readOnly && (!strings.Contains(w, "partial "+real) || !strings.Contains(w, "agent/a.d/protect") || !strings.Contains(w, "protected paths")) {
				t.Errorf("warning does not name the grant: %q", w)
			}
			if c.grant != nil && !c.readOnly && p.Granted != "partial "+real {
				t.Errorf("Granted = %q", p.Granted)
			}
		})
	}
}

// An unreadable directory cuts the walk short: what it holds is unknown.
func TestWalkUnreadableDirIsCutShort(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root reads a mode-000 directory")
	}
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "x/.git"), 0o755)
	os.Chmod(filepath.Join(ws, "x"), 0)
	t.Cleanup(func() { os.Chmod(filepath.Join(ws, "x"), 0o755) })
	d, err := Open(ws, Options{Homes: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if f := Walk(d.File, Grants{}, nil); !strings.Contains(f.Truncated, "cannot read x") {
		t.Errorf("Truncated = %q", f.Truncated)
	}
}

// The end-of-run check says when a walk was cut short, never "nothing".
func TestSnapshotIncomplete(t *testing.T) {
	small, big := plant(t, 3), plant(t, MaxProtected+6)
	take := func(ws string) *Snapshot {
		d, err := Open(ws, Options{Homes: []string{}})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		return Take(d.File, Grants{}, d.Hide)
	}
	if s := take(small); s.Incomplete(take(small), "/workspace") != "" {
		t.Errorf("a complete walk reported incomplete")
	}
	before := take(big)
	os.WriteFile(filepath.Join(big, "nested/repo/.git/hooks/pre-commit"), []byte("#!/bin/sh\n"), 0o755)
	after := take(big)
	if ch := before.Changes(after, "/workspace"); len(ch) != 0 {
		t.Logf("changes seen although cut short: %v", ch)
	}
	w := before.Incomplete(after, "/workspace")
	if !strings.Contains(w, "/workspace") || !strings.Contains(w, "more than 1024 protected paths") || !strings.Contains(w, "not reported") {
		t.Errorf("Incomplete = %q", w)
	}
}

// TestPinDirs (spec: B1): the directories to pin are those on the way to
// nested repositories and hidden trees, parents first — not those on the
// way to other protected names or symlinked ones.
func TestPinDirs(t *testing.T) {
	got := PinDirs([]Entry{
		{Rel: ".git", Kind: KindDir, Repo: true},
		{Rel: "vendor/c/.git", Kind: KindDir, Repo: true},
		{Rel: "vendor/b/.git", Kind: KindFile, Repo: true},
		{Rel: "srv/bare.git/hooks", Kind: KindAbsent, Repo: true},
		{Rel: "x/y/.vscode", Kind: KindDir},
		{Rel: "l/.git", Kind: KindSymlink, Repo: true},
	}, []string{"home/.local/share/ctx"})
	want := []string{"home", "srv", "vendor", "home/.local", "srv/bare.git", "vendor/b", "vendor/c", "home/.local/share"}
	if !slices.Equal(got, want) {
		t.Errorf("PinDirs = %v, want %v", got, want)
	}
}

// TestProtectTooManyPins (spec: B1): a directory whose walk finds more
// directories leading to repositories than a view pins is cut short
// (read-only) — an agent making decoys must not push a real repository's
// directories out of the pins.
func TestProtectTooManyPins(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i <= MaxPins; i++ {
		os.MkdirAll(filepath.Join(dir, "d"+strconv.Itoa(i), ".git"), 0o755)
	}
	d, err := Open(dir, Options{Layout: layout.Layout{Root: t.TempDir(), Runtime: t.TempDir()}, Write: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	p := Protect(d, Grants{})
	if !p.ReadOnly || !strings.Contains(p.Truncated, "directories lead to repositories") {
		t.Errorf("%d repositories one level down: ReadOnly %v, Truncated %q", MaxPins+1, p.ReadOnly, p.Truncated)
	}
	os.RemoveAll(filepath.Join(dir, "d0"))
	if p := Protect(d, Grants{}); p.ReadOnly || p.Truncated != "" {
		t.Errorf("%d: ReadOnly %v, Truncated %q", MaxPins, p.ReadOnly, p.Truncated)
	}
}
