package mcpconf

import (
	"errors"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		name, data string
		ok         bool
	}{
		{"empty", `{"version":1,"servers":{}}`, true},
		{"stdio", `{"version":1,"servers":{"fs":{"command":"/usr/bin/node","args":["/opt/x.js","/workspace"],"binds":["/opt/npm"],"env":["TOKEN"]}}}`, true},
		{"url", `{"version":1,"servers":{"r":{"url":"https://example.com/mcp","net":true}}}`, true},
		{"url without net", `{"version":1,"servers":{"r":{"url":"https://example.com/mcp"}}}`, false},
		{"both", `{"version":1,"servers":{"r":{"url":"https://e/x","command":"/bin/true","net":true}}}`, false},
		{"neither", `{"version":1,"servers":{"r":{}}}`, false},
		{"relative command", `{"version":1,"servers":{"r":{"command":"node"}}}`, false},
		{"dotted name", `{"version":1,"servers":{"a.b":{"command":"/bin/true"}}}`, false},
		{"unknown field", `{"version":1,"servers":{},"x":1}`, false},
		{"version", `{"version":2,"servers":{}}`, false},
		{"bind under workspace", `{"version":1,"servers":{"r":{"command":"/bin/true","binds":["/workspace/x"]}}}`, false},
		{"bind root", `{"version":1,"servers":{"r":{"command":"/bin/true","binds":["/"]}}}`, false},
		{"bad env", `{"version":1,"servers":{"r":{"command":"/bin/true","env":["A=B"]}}}`, false},
		{"null server", `{"version":1,"servers":{"r":null}}`, false},
		{"trailing", `{"version":1,"servers":{}} {}`, false},
	} {
		_, err := Parse("f", []byte(c.data))
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok=%v", c.name, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v is not ErrInvalid", c.name, err)
		}
	}
}

func TestSaveLoadMerge(t *testing.T) {
	p := filepath.Join(t.TempDir(), "d", FileName)
	f, err := Load(p)
	if err != nil || len(f.Servers) != 0 {
		t.Fatalf("absent: %v %v", f, err)
	}
	f.Servers["a"] = &Server{Command: "/bin/true", Args: []string{"x"}}
	f.Servers["b"] = &Server{Command: "/bin/false"}
	if err := Save(p, f); err != nil {
		t.Fatal(err)
	}
	g, err := Load(p)
	if err != nil || !reflect.DeepEqual(f, g) {
		t.Fatalf("round trip: %+v %v", g, err)
	}
	agent := &File{Servers: map[string]*Server{"b": {Command: "/bin/echo"}}}
	m := Merge(g, agent)
	if m["b"].Command != "/bin/echo" || m["a"].Command != "/bin/true" || !reflect.DeepEqual(Names(m), []string{"a", "b"}) {
		t.Fatalf("merge: %+v", m)
	}
	if err := Save(p, &File{Servers: map[string]*Server{"bad": {}}}); err == nil {
		t.Fatal("saved an invalid declaration")
	}
}

func TestEnv(t *testing.T) {
	data, err := FormatEnv(map[string]string{"B": "x=y", "A": " spaced "})
	if err != nil || string(data) != "A= spaced \nB=x=y\n" {
		t.Fatalf("%q %v", data, err)
	}
	env, err := ParseEnv(data)
	if err != nil || env["B"] != "x=y" || env["A"] != " spaced " {
		t.Fatalf("%v %v", env, err)
	}
	if _, err := FormatEnv(map[string]string{"A": "a\nB=b"}); err == nil {
		t.Fatal("newline accepted")
	}
	if _, err := ParseEnv([]byte("no equals\n")); err == nil {
		t.Fatal("bad line accepted")
	}
}

// FuzzParse: Parse never panics, and what it accepts saves and parses back.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"version":1,"servers":{"fs":{"command":"/usr/bin/node","args":["/x"],"binds":["/opt"],"env":["T"]}}}`))
	f.Add([]byte(`{"version":1,"servers":{"r":{"url":"http://h/x","net":true}}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse("f", data)
		if err != nil {
			return
		}
		p := filepath.Join(t.TempDir(), FileName)
		if err := Save(p, v); err != nil {
			t.Fatalf("accepted but not saved: %v", err)
		}
		if _, err := Load(p); err != nil {
			t.Fatalf("saved but not loaded: %v", err)
		}
	})
}
