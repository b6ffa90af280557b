package main

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/alecthomas/kong"
)

// kongHelp is what kong itself prints for `ctx args…` when $COLUMNS is
// columns (a bytes.Buffer is no terminal: kong reads $COLUMNS, else 80).
func kongHelp(t *testing.T, columns int, args ...string) string {
	t.Helper()
	t.Setenv("COLUMNS", strconv.Itoa(columns))
	var out bytes.Buffer
	exited := false
	p, err := newParser(args, kong.Writers(&out, &out), kong.Exit(func(int) { exited = true }))
	if err != nil {
		t.Fatal(err)
	}
	p.Parse(args)
	if !exited {
		t.Fatalf("kong did not exit for %v", args)
	}
	return out.String()
}

// TestBakedHelpIsKongs: the embedded `ctx --help` is byte for byte what
// kong renders from the whole model at every width the baked text serves;
// narrower, kong renders it (wrapped narrower).
func TestBakedHelpIsKongs(t *testing.T) {
	want := kongHelp(t, helpWrap, "--help")
	if *update {
		if err := os.WriteFile("help.txt", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if bakedHelp != want {
		t.Fatalf("cmd/ctx/help.txt is stale: go test ./cmd/ctx -run TestBakedHelpIsKongs -update")
	}
	for _, cols := range []int{80, 81, 120, 300} {
		for _, arg := range []string{"--help", "-h"} {
			if !bakedHelpServes([]string{arg}, cols) {
				t.Errorf("the baked help does not serve %s at %d columns", arg, cols)
			}
			if got := kongHelp(t, cols, arg); got != bakedHelp {
				t.Errorf("kong's %s at %d columns differs from the baked text", arg, cols)
			}
		}
	}
	narrow := kongHelp(t, 60, "--help")
	if bakedHelpServes([]string{"--help"}, 60) || narrow == bakedHelp {
		t.Error("at 60 columns the baked text would serve")
	}
	for _, l := range strings.Split(narrow, "\n") {
		// Kong's closing hint is never wrapped.
		if len(l) > 60 && !strings.HasPrefix(l, `Run "ctx <command> --help"`) {
			t.Errorf("kong's help at 60 columns has a longer line: %q", l)
			break
		}
	}
	for _, args := range [][]string{{"agent", "--help"}, {"--help", "agent"}, {"--help", "--version"}} {
		if bakedHelpServes(args, 200) {
			t.Errorf("the baked text serves %v", args)
		}
	}
}

// TestHelpWidth: $COLUMNS wins; a file that is no terminal is 80 wide.
func TestHelpWidth(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		env  string
		want int
	}{{"", 80}, {"132", 132}, {"x", 80}, {"40", 40}} {
		t.Setenv("COLUMNS", c.env)
		if got := helpWidth(f); got != c.want {
			t.Errorf("COLUMNS=%q: width %d, want %d", c.env, got, c.want)
		}
	}
}
