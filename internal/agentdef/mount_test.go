package agentdef

import (
	"github.com/cortexfs/ctx/internal/layout"
	"strings"
	"testing"
)

// TestParseMountNet: `net` and `net local HOST:PORT` lines; a bad grant
// makes the file invalid (runs fail closed). spec: V1, V3
func TestParseMountNet(t *testing.T) {
	cases := []struct {
		in     string
		public bool
		local  string
		err    string
	}{
		{"", false, "", ""},
		{"net\n", true, "", ""},
		{"# model server\nnet local 127.0.0.1:11434\n", false, "127.0.0.1:11434", ""},
		{"net\nnet local [::1]:8080\nnet local 10.0.0.5:80\nnet local 10.0.0.5:80\n", true, "[::1]:8080 10.0.0.5:80", ""},
		{"net local localhost:11434\n", false, "", "line 1: net local"},
		{"net local 127.0.0.1\n", false, "", "want HOST:PORT"},
		{"net local 127.0.0.1:0\n", false, "", "PORT must be"},
		{"net local\n", false, "", "want `ro|rw HOST SANDBOX`, `net` or `net local HOST:PORT`"},
		{"net local 127.0.0.1:1 extra\n", false, "", "want `ro|rw"},
		{"net remote 1.2.3.4:1\n", false, "", "want `ro|rw"},
		{"net\nnet local [fe80::1%eth0]:1\n", false, "", "line 2"},
		{"net all\n", false, "", "want `ro|rw"},
	}
	for _, c := range cases {
		_, pol, err := ParseMount([]byte(c.in))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: err %v, want %q", c.in, err, c.err)
			}
			continue
		}
		var local []string
		for _, g := range pol.Local {
			local = append(local, g.String())
		}
		if err != nil || pol.Public != c.public || strings.Join(local, " ") != c.local {
			t.Errorf("%q: %+v %v", c.in, pol, err)
		}
	}
}

// FuzzParseMount: never panics; an accepted file's grants are IP
// literals with a port that the grammar takes back.
func FuzzParseMount(f *testing.F) {
	for _, s := range []string{"net\n", "net local 127.0.0.1:11434\n", "ro /a /b\nrw /c /d\nnet\n", "net local [::1]:1\n",
		"net local localhost:1\n", "net local 1.2.3.4:99999\n", "#x\n\nnet local 10.0.0.1:80\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, pol, err := ParseMount(b)
		if err != nil {
			return
		}
		for _, g := range pol.Local {
			if _, again, err := ParseMount([]byte("net local " + g.String() + "\n")); err != nil || len(again.Local) != 1 || again.Local[0] != g {
				t.Fatalf("grant %v does not round-trip: %v", g, err)
			}
		}
	})
}

// TestSetMountNetLocal: `ctx agent set NAME mount` takes a net local
// grant, and Load gives it to the definition. spec: V1
func TestSetMountNetLocal(t *testing.T) {
	l := layout.Layout{Root: t.TempDir(), Runtime: t.TempDir(), UID: 1000}
	if err := l.EnsureRoot(); err != nil {
		t.Fatal(err)
	}
	if err := Create(l, "a", CreateOptions{Models: []string{"openai/gpt-4o"}}); err != nil {
		t.Fatal(err)
	}
	if err := Set(l, "a", "mount", "net\nnet local 127.0.0.1:11434", nil); err != nil {
		t.Fatal(err)
	}
	d, err := Load(l, "a")
	if err != nil {
		t.Fatal(err)
	}
	if !d.Network || len(d.NetLocal) != 1 || d.NetLocal[0].String() != "127.0.0.1:11434" || !d.Net().Enabled() {
		t.Errorf("loaded %v %v", d.Network, d.NetLocal)
	}
}
