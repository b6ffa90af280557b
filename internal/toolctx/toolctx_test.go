package toolctx

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestContextTextPinnedOldestKept: the pinned tool is the OLDEST load, so
// an eviction that ignored pinning (oldest first) would drop it; it must
// stay while every unpinned tool goes. ContextPinned is that floor. spec: K5
func TestContextTextPinnedOldestKept(t *testing.T) {
	var st State
	st.Load(Loaded{Name: "keep", Description: "pinned and oldest", Path: "/ctx/tool/keep", Pinned: true})
	st.Load(Loaded{Name: "b", Description: strings.Repeat("tool b ", 10), Path: "/ctx/tool/b"})
	st.Load(Loaded{Name: "c", Description: "tool c", Path: "/ctx/tool/c"})
	full := ContextText(st, 0)
	got := ContextText(st, len(full)-1)
	if !strings.Contains(got, "- keep (pinned)") || strings.Contains(got, "- b:") || !strings.Contains(got, "- c:") {
		t.Fatalf("evict one kept the wrong tools:\n%s", got)
	}
	floor := ContextPinned(st)
	want := "Tools loaded through tsh (run one with: tsh call NAME [ARGS...]):\n" +
		"- keep (pinned): pinned and oldest [/ctx/tool/keep]\n(2 unpinned evicted; still callable)\n"
	if floor != want {
		t.Fatalf("ContextPinned =\n%s\nwant\n%s", floor, want)
	}
	if got := ContextText(st, len(floor)); got != floor {
		t.Fatalf("at the floor:\n%s", got)
	}
	if ContextPinned(State{}) != "" {
		t.Fatal("empty state has a floor")
	}
}

func TestContextText(t *testing.T) {
	var st State
	if got := ContextText(st, 0); got != "" {
		t.Fatalf("empty state: %q", got)
	}
	st.Load(Loaded{Name: "a", Description: "tool a\nsecond line", Path: "/ctx/tool/a"})
	st.Load(Loaded{Name: "b", Description: "tool b", Path: "/ctx/tool/b"})
	st.Load(Loaded{Name: "c", Description: "tool c", Path: "/ctx/tool/c", Pinned: true})
	full := ContextText(st, 0)
	want := "Tools loaded through tsh (run one with: tsh call NAME [ARGS...]):\n" +
		"- a: tool a [/ctx/tool/a]\n" +
		"  second line\n" + // A description's lines stay lines, indented under the tool
		"- b: tool b [/ctx/tool/b]\n" +
		"- c (pinned): tool c [/ctx/tool/c]\n"
	if full != want {
		t.Fatalf("ContextText =\n%s\nwant\n%s", full, want)
	}
	if ContextText(st, len(full)) != full {
		t.Fatal("text at exactly the budget changed")
	}
	// spec: K5 — over budget, unpinned metadata goes oldest first; pinned stays.
	got := ContextText(st, len(full)-1)
	if strings.Contains(got, "- a:") || !strings.Contains(got, "- b:") || !strings.Contains(got, "- c (pinned)") ||
		!strings.Contains(got, "(1 unpinned evicted; still callable)\n") || len(got) > len(full)-1 {
		t.Fatalf("evict one:\n%s", got)
	}
	got = ContextText(st, 140)
	if strings.Contains(got, "- b:") || !strings.Contains(got, "- c (pinned)") || len(got) > 140 {
		t.Fatalf("evict two:\n%s", got)
	}
	// Pinned alone over budget: cut on a character boundary, never over.
	st2 := State{}
	st2.Load(Loaded{Name: "p", Description: strings.Repeat("é", 100), Pinned: true})
	got = ContextText(st2, 101)
	if len(got) > 101 || !strings.HasPrefix(got, "Tools loaded") || !isValidUTF8(got) {
		t.Fatalf("cut: %q", got)
	}
	// Eviction is a view: the state still holds every tool.
	if len(st.Tools) != 3 {
		t.Fatal("ContextText changed the state")
	}
}

func isValidUTF8(s string) bool { return strings.ToValidUTF8(s, "\x00") == s }

func TestStateOps(t *testing.T) {
	var st State
	st.Load(Loaded{Name: "a"})
	st.Load(Loaded{Name: "b"})
	if err := st.Pin("a"); err != nil {
		t.Fatal(err)
	}
	st.Load(Loaded{Name: "a", Description: "new"}) // reload: newest, keeps pin
	if st.Tools[1].Name != "a" || !st.Tools[1].Pinned || st.Tools[1].Description != "new" {
		t.Fatalf("reload: %+v", st.Tools)
	}
	if err := st.Unpin("zz"); !errors.Is(err, ErrNotLoaded) {
		t.Fatal(err)
	}
	if err := st.Unload("a"); err != nil || st.Find("a") >= 0 {
		t.Fatal("unload")
	}
	if err := st.Unload("a"); !errors.Is(err, ErrNotLoaded) {
		t.Fatal(err)
	}
}

func TestUpdateStateRoundTrip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", StateFileName)
	_, err := UpdateState(p, func(s *State) error { s.Load(Loaded{Name: "x", Pinned: true}); return nil })
	if err != nil {
		t.Fatal(err)
	}
	st, err := ReadState(p)
	if err != nil || len(st.Tools) != 1 || !st.Tools[0].Pinned || st.Next != 1 {
		t.Fatalf("%+v %v", st, err)
	}
	fi, _ := os.Stat(p)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	// A failing update writes nothing.
	_, err = UpdateState(p, func(s *State) error { s.Tools = nil; return errors.New("no") })
	if err == nil {
		t.Fatal("want error")
	}
	if st, _ := ReadState(p); len(st.Tools) != 1 {
		t.Fatal("failed update was written")
	}
	if err := os.WriteFile(p, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadState(p); err == nil {
		t.Fatal("corrupt state accepted")
	}
}

// TestMultiLineDescription: a multi-line tool description: `tsh list` shows its
// first line, the tool context keeps every line (indented), control
// characters never pass.
func TestMultiLineDescription(t *testing.T) {
	desc := "Print a file with line numbers.\n\nargv: read PATH [--offset N]\nexample: read main.go\x1b[31m\n"
	if got := Summary(desc); got != "Print a file with line numbers." {
		t.Errorf("summary %q", got)
	}
	var st State
	st.Load(Loaded{Name: "read", Description: desc, Path: "/ctx/tool/read"})
	want := "Tools loaded through tsh (run one with: tsh call NAME [ARGS...]):\n" +
		"- read: Print a file with line numbers. [/ctx/tool/read]\n" +
		"  argv: read PATH [--offset N]\n" +
		"  example: read main.go [31m\n"
	if got := ContextText(st, DefaultContextBudget); got != want {
		t.Errorf("context:\n%q\nwant\n%q", got, want)
	}
}
