package clusterconf

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const good = `{"cluster":"prod","node":"n1","listen":"10.0.0.1:7000",
 "etcd":["https://10.0.0.9:2379","https://[fd00::9]:2379"],
 "tls_dir":"/etc/ctx/tls","root":"/srv/ctx","runtime_dir":"/run/ctx",
 "workspaces":["/srv/work","/home"]}`

// with returns good with key set to the JSON value v (or removed when v
// is "").
func with(t *testing.T, key, v string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(good), &m); err != nil {
		t.Fatal(err)
	}
	if v == "" {
		delete(m, key)
	} else {
		m[key] = json.RawMessage(v)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseGood(t *testing.T) {
	c, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{Cluster: "prod", Node: "n1", Listen: "10.0.0.1:7000",
		Etcd:   []string{"https://10.0.0.9:2379", "https://[fd00::9]:2379"},
		TLSDir: "/etc/ctx/tls", Root: "/srv/ctx", RuntimeDir: "/run/ctx",
		Workspaces: []string{"/srv/work", "/home"}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Parse = %+v, want %+v", c, want)
	}
	// Paths come back clean.
	c, err = Parse([]byte(with(t, "workspaces", `["/srv//work/","/home/./x"]`)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Workspaces, []string{"/srv/work", "/home/x"}) {
		t.Errorf("workspaces %q, want cleaned", c.Workspaces)
	}
	for key, v := range map[string]string{
		"listen":     `"node-1.example:0"`,
		"etcd":       `["https://etcd.example:2379/"]`,
		"workspaces": `["/srv/work","/srv/work/deeper"]`, // nested is fine
	} {
		if _, err := Parse([]byte(with(t, key, v))); err != nil {
			t.Errorf("%s = %s: %v", key, v, err)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"not an object", `[]`, "not a JSON object"},
		{"trailing", good + `{}`, "trailing data"},
		{"unknown key", strings.Replace(good, `"cluster"`, `"region":"x","cluster"`, 1), `unknown key "region"`},
		{"case variant", strings.Replace(good, `"node"`, `"Node"`, 1), "only in case"},
		{"duplicate key", strings.Replace(good, `"node":"n1"`, `"node":"n1","node":"n2"`, 1), "duplicate key"},
		{"missing cluster", with(t, "cluster", ""), `missing key "cluster"`},
		{"missing workspaces", with(t, "workspaces", ""), `missing key "workspaces"`},
		{"null string", with(t, "root", "null"), "want a string"},
		{"number string", with(t, "node", "7"), "want a string"},
		{"null list", with(t, "etcd", "null"), "want an array"},
		{"string list", with(t, "etcd", `"https://a:1"`), "want an array"},
		{"null item", with(t, "workspaces", `["/a",null]`), "item 1"},
		{"bad cluster", with(t, "cluster", `"a/b"`), "cluster name"},
		{"empty cluster", with(t, "cluster", `""`), "cluster name"},
		{"bad node", with(t, "node", `"-x"`), "node name"},
		{"reserved node", with(t, "node", `"ca"`), "reserved"},
		{"listen no port", with(t, "listen", `"10.0.0.1"`), "HOST:PORT"},
		{"listen no host", with(t, "listen", `":7000"`), "with a host"},
		{"listen named port", with(t, "listen", `"h:http"`), "not a number"},
		{"listen port range", with(t, "listen", `"h:65536"`), "out of range"},
		{"listen negative", with(t, "listen", `"h:-1"`), "not a number"},
		{"listen zone", with(t, "listen", `"[fe80::1%eth0]:7000"`), "IP address or a DNS name"},
		{"listen odd host", with(t, "listen", `"a b:7000"`), "IP address or a DNS name"},
		{"listen newline", with(t, "listen", `"a\n:7000"`), "IP address or a DNS name"},
		{"etcd odd host", with(t, "etcd", `["https://e_1:2379"]`), "IP address or a DNS name"},
		{"etcd empty", with(t, "etcd", `[]`), "no endpoint"},
		{"etcd http", with(t, "etcd", `["http://10.0.0.9:2379"]`), "https://"},
		{"etcd upper scheme", with(t, "etcd", `["HTTPS://10.0.0.9:2379"]`), "https://"},
		{"etcd bare", with(t, "etcd", `["10.0.0.9:2379"]`), "https://"},
		{"etcd no port", with(t, "etcd", `["https://10.0.0.9"]`), "no port"},
		{"etcd no host", with(t, "etcd", `["https://:2379"]`), "no host"},
		{"etcd path", with(t, "etcd", `["https://e:2379/v3"]`), "nothing else"},
		{"etcd query", with(t, "etcd", `["https://e:2379?x=1"]`), "nothing else"},
		{"etcd user", with(t, "etcd", `["https://u:p@e:2379"]`), "nothing else"},
		{"etcd twice", with(t, "etcd", `["https://e:2379","https://e:2379"]`), "given twice"},
		{"relative tls_dir", with(t, "tls_dir", `"tls"`), "not an absolute path"},
		{"relative root", with(t, "root", `"./srv"`), "not an absolute path"},
		{"empty runtime_dir", with(t, "runtime_dir", `""`), "not an absolute path"},
		{"dotdot root", with(t, "root", `"/srv/link/../ctx"`), ".. component"},
		{"workspaces empty", with(t, "workspaces", `[]`), "no shared prefix"},
		{"workspace relative", with(t, "workspaces", `["/a","b"]`), "not an absolute path"},
		{"workspaces twice", with(t, "workspaces", `["/a","/a/"]`), "given twice"},
		{"runtime under root", with(t, "runtime_dir", `"/srv/ctx/run"`), "under \"root\""},
		{"runtime is root", with(t, "runtime_dir", `"/srv/ctx/"`), "under \"root\""},
		{"runtime under workspace", with(t, "runtime_dir", `"/home/n1/run"`), "shared workspace prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.in))
			if err == nil {
				t.Fatalf("accepted: %+v", c)
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want ErrInvalid mentioning %q", err, tc.want)
			}
		})
	}
}

// TestRuntimeBesideRoot: "/srv/ctx-run" is beside "/srv/ctx", not under it.
func TestRuntimeBesideRoot(t *testing.T) {
	if _, err := Parse([]byte(with(t, "runtime_dir", `"/srv/ctx-run"`))); err != nil {
		t.Error(err)
	}
}

func TestShared(t *testing.T) {
	c, err := Parse([]byte(with(t, "workspaces", `["/a/b","/srv/"]`)))
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{
		"/a/b":       true,
		"/a/b/":      true,
		"/a/b/c/d":   true,
		"/srv":       true,
		"/srv/x":     true,
		"/a/bc":      false, // component-wise
		"/a":         false,
		"/":          false,
		"/srvx":      false,
		"a/b":        false, // relative
		"":           false,
		"/a/b/../c":  false, // not resolved
		"/x/../a/b":  false,
		"/a/b/./c":   true,
		"/other/a/b": false,
	} {
		if got := c.Shared(p); got != want {
			t.Errorf("Shared(%q) = %v, want %v", p, got, want)
		}
	}
	root, err := Parse([]byte(with(t, "workspaces", `["/"]`)))
	if err != nil {
		// "/" as the one prefix puts runtime_dir under it.
		if !strings.Contains(err.Error(), "shared workspace prefix") {
			t.Fatal(err)
		}
	} else {
		t.Errorf("workspaces [\"/\"] accepted with runtime_dir %s under it", root.RuntimeDir)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "cluster.json")
	if err := os.WriteFile(p, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p)
	if err != nil || c.Node != "n1" {
		t.Fatalf("Load = %+v, %v", c, err)
	}
	if _, err := Load(filepath.Join(dir, "none.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(with(t, "etcd", `["http://e:2379"]`)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(bad); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), bad) {
		t.Errorf("an invalid file: %v, want ErrInvalid naming %s", err, bad)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(`{"cluster":"`+strings.Repeat("x", maxFile)+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a huge file: %v", err)
	}
}

// FuzzParse: Parse never panics, and what it accepts keeps its promises:
// every key set, paths absolute and clean, every workspace shared, the
// runtime directory neither under root nor shared, and a re-encoding
// parses to the same Config.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"cluster":"c","node":"n","listen":"h:1","etcd":["https://e:1"],"tls_dir":"/t","root":"/r","runtime_dir":"/x","workspaces":["/w/"]}`))
	f.Add([]byte(`{"cluster":"c","node":"n","listen":"[::1]:0","etcd":["https://[::1]:2379/"],"tls_dir":"/t","root":"/r","runtime_dir":"/r/x","workspaces":["/w","/w"]}`))
	f.Add([]byte(`{"cluster":"c","node":"ca","listen":"h:99999","etcd":["http://e"],"tls_dir":"t","root":"/a/../b","runtime_dir":null,"workspaces":[null]}`))
	f.Add([]byte(`{"node":"n","node":"m"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		for _, p := range append([]string{c.TLSDir, c.Root, c.RuntimeDir}, c.Workspaces...) {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p {
				t.Fatalf("path %q not absolute and clean", p)
			}
		}
		if c.Cluster == "" || c.Node == "" || c.Listen == "" || len(c.Etcd) == 0 || len(c.Workspaces) == 0 {
			t.Fatalf("accepted with an empty field: %+v", c)
		}
		for _, w := range c.Workspaces {
			if !c.Shared(w) || !c.Shared(w+"/x") {
				t.Fatalf("workspace %q not shared", w)
			}
		}
		if c.Shared(c.RuntimeDir) || strings.HasPrefix(c.RuntimeDir+"/", c.Root+"/") {
			t.Fatalf("runtime_dir %q shared or under root %q", c.RuntimeDir, c.Root)
		}
		for _, e := range c.Etcd {
			if !strings.HasPrefix(e, "https://") {
				t.Fatalf("etcd %q not https", e)
			}
		}
		again, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := Parse(again)
		if err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("re-encoded %s: %+v, %v; want %+v", again, c2, err, c)
		}
	})
}
