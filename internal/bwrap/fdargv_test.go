package bwrap

import (
	"os"
	"strings"
	"testing"
)

// TestBindByFD: every path bind becomes a descriptor bind opened without
// following a symlink; a symlinked source fails the start, a missing -try
// source is dropped, an unknown option is refused. spec: B3
func TestBindByFD(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(dir+"/ws/.git", 0o755)
	os.MkdirAll(dir+"/outside", 0o755)
	os.Symlink(dir+"/outside", dir+"/ws/link")
	argv := []string{"/usr/bin/bwrap", "--symlink", "X", "--bind", "--bind", dir + "/ws", "/workspace",
		"--ro-bind", dir + "/ws/.git", "/workspace/.git", "--ro-bind-try", dir + "/missing", "/ctx/m",
		"--ro-bind-try", dir + "/ws/link", "/etc/x", "--", "/ctx/bin/tsh", "--bind"}
	got, files, err := BindByFD(argv, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	want := []string{"/usr/bin/bwrap", "--symlink", "X", "--bind", "--bind-fd", "3", "/workspace",
		"--ro-bind-fd", "4", "/workspace/.git", "--ro-bind-try", dir + "/ws/link", "/etc/x", "--", "/ctx/bin/tsh", "--bind"}
	if strings.Join(got, " ") != strings.Join(want, " ") || len(files) != 2 {
		t.Fatalf("got %q (%d files)", got, len(files))
	}
	for _, bad := range [][]string{
		{"/usr/bin/bwrap", "--ro-bind", dir + "/ws/link", "/workspace/x", "--", "/x"},     // a symlink as the source
		{"/usr/bin/bwrap", "--ro-bind", dir + "/ws/link/y", "/home/agent/y", "--", "/x"},  // a symlink in the path
		{"/usr/bin/bwrap", "--ro-bind-try", dir + "/ws/link", "/workspace/x", "--", "/x"}, // -try drops only a missing one
		{"/usr/bin/bwrap", "--bind", dir + "/ws/link", "/data", "--", "/x"},               // writable: always checked
		{"/usr/bin/bwrap", "--bind-everything", "--", "/x"},
		{"/usr/bin/bwrap", "--setenv", "K", "V", "--", "/x"}, // never an environment on argv (B3)
		{"/usr/bin/bwrap", "--args", "3", "--", "/x"},        // nor arguments from a descriptor it did not open
	} {
		if _, files, err := BindByFD(bad, nil); err == nil {
			for _, f := range files {
				f.Close()
			}
			t.Errorf("accepted %q", bad)
		}
	}
}

// TestOptions: the grammar's table — each option with its arguments, the
// command after "--", and what it refuses. spec: B3
func TestOptions(t *testing.T) {
	opts, cmd, err := Options([]string{"bwrap", "--clearenv", "--bind", "a", "/b", "--uid", "1", "--", "sh", "--bind"})
	if err != nil {
		t.Fatal(err)
	}
	if len(opts) != 3 || strings.Join(opts[1], " ") != "--bind a /b" || strings.Join(cmd, " ") != "sh --bind" {
		t.Fatalf("opts %q cmd %q", opts, cmd)
	}
	for _, bad := range [][]string{
		{},
		{"bwrap", "--bind", "a"},        // cut short
		{"bwrap", "--setenv", "K", "V"}, // never on argv (B3)
		{"bwrap", "--args", "3", "--"},  // a descriptor it did not open
		{"bwrap", "--unknown-option"},
	} {
		if _, _, err := Options(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// FuzzOptions: any argv is split or refused, never a panic, and what is
// split puts every word back in order.
func FuzzOptions(f *testing.F) {
	f.Add("bwrap\x00--bind\x00a\x00/b\x00--\x00sh")
	f.Add("bwrap\x00--ro-bind-try\x00x")
	f.Add("bwrap\x00--clearenv\x00--uid\x001000\x00--symlink\x00a\x00b")
	f.Fuzz(func(t *testing.T, s string) {
		argv := strings.Split(s, "\x00")
		opts, cmd, err := Options(argv)
		if err != nil {
			return
		}
		back := []string{argv[0]}
		for _, o := range opts {
			back = append(back, o...)
		}
		if len(back) < len(argv) {
			back = append(back, "--")
			back = append(back, cmd...)
		}
		if strings.Join(back, "\x00") != s {
			t.Fatalf("split %q into %q + %q", argv, opts, cmd)
		}
	})
}
