package mcpinstall

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestResolve: an npm bin symlink anywhere on the host becomes node on the
// real script, with the outermost node_modules and node's own prefix bound;
// npx of a package that is not installed is refused with the install
// command; of an installed one, its bin is used.
func TestResolve(t *testing.T) {
	dir := t.TempDir()
	nm := filepath.Join(dir, "prefix", "node_modules")
	pkg := filepath.Join(nm, "@scope", "server-x")
	os.MkdirAll(filepath.Join(pkg, "dist"), 0o755)
	os.WriteFile(filepath.Join(pkg, "package.json"), []byte(`{"name":"@scope/server-x","bin":{"mcp-server-x":"dist/index.js"}}`), 0o644)
	script := filepath.Join(pkg, "dist", "index.js")
	os.WriteFile(script, []byte("#!/usr/bin/env node\nconsole.log(1)\n"), 0o755)
	os.MkdirAll(filepath.Join(nm, ".bin"), 0o755)
	os.Symlink("../@scope/server-x/dist/index.js", filepath.Join(nm, ".bin", "mcp-server-x"))
	node := filepath.Join(dir, "opt", "node", "bin", "node")
	os.MkdirAll(filepath.Dir(node), 0o755)
	os.WriteFile(node, []byte("#!/bin/sh\n"), 0o755)
	cfgFile := filepath.Join(dir, "conf.json")
	os.WriteFile(cfgFile, []byte("{}"), 0o644)
	r := Resolver{
		LookPath: func(n string) (string, error) {
			switch n {
			case "node":
				return node, nil
			case "mcp-server-x":
				return filepath.Join(nm, ".bin", "mcp-server-x"), nil
			}
			return "", errors.New("not found")
		},
		NpmRoot: func() (string, error) { return nm, nil },
	}
	s, err := r.Resolve("mcp-server-x", []string{"/workspace", cfgFile})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "opt", "node"), nm, cfgFile}
	if s.Command != node || !reflect.DeepEqual(s.Args, []string{script, "/workspace", cfgFile}) || !reflect.DeepEqual(s.Binds, want) {
		t.Errorf("resolved %+v, want binds %v", s, want)
	}
	if err := s.Validate("x"); err != nil {
		t.Error(err)
	}
	s, err = r.Resolve("npx", []string{"-y", "@scope/server-x@1.0", "/workspace"})
	if err != nil || s.Command != node || s.Args[0] != script || s.Args[1] != "/workspace" {
		t.Errorf("npx of an installed package: %+v %v", s, err)
	}
	_, err = r.Resolve("npx", []string{"-y", "@scope/absent"})
	if !errors.Is(err, ErrDownload) || !strings.Contains(err.Error(), "npm install -g @scope/absent") {
		t.Errorf("npx of an absent package: %v", err)
	}
	if _, err := r.Resolve("nope", nil); err == nil {
		t.Error("a command not on PATH resolved")
	}
	bin := filepath.Join(dir, "srv")
	os.WriteFile(bin, []byte("\x7fELF"), 0o755)
	if s, err := r.Resolve(bin, nil); err != nil || s.Command != bin || len(s.Binds) != 0 {
		t.Errorf("a binary: %+v %v", s, err)
	}
}

// TestResolveNodeScript: `node /path/dist/index.js` binds the package the
// script belongs to — the outermost node_modules above it, or the package
// root (package.json and its node_modules) of a checkout — not only the
// file, so a multi-file server finds its modules; a relative script
// becomes its real absolute path (README "MCP servers as tsh tools").
func TestResolveNodeScript(t *testing.T) {
	dir := t.TempDir()
	node := filepath.Join(dir, "opt", "node", "bin", "node")
	os.MkdirAll(filepath.Dir(node), 0o755)
	os.WriteFile(node, []byte("#!/bin/sh\n"), 0o755)
	nm := filepath.Join(dir, "prefix", "node_modules")
	inNM := filepath.Join(nm, "@scope", "server-x", "dist", "index.js")
	os.MkdirAll(filepath.Dir(inNM), 0o755)
	os.WriteFile(inNM, []byte("import './lib.js'\n"), 0o644)
	repo := filepath.Join(dir, "src", "my-server")
	checkout := filepath.Join(repo, "build", "index.js")
	os.MkdirAll(filepath.Dir(checkout), 0o755)
	os.MkdirAll(filepath.Join(repo, "node_modules", "dep"), 0o755)
	os.WriteFile(filepath.Join(repo, "package.json"), []byte(`{"name":"my-server"}`), 0o644)
	os.WriteFile(checkout, []byte("import 'dep'\n"), 0o644)
	r := Resolver{LookPath: func(n string) (string, error) {
		if n == "node" {
			return node, nil
		}
		return "", errors.New("not found")
	}}
	nodeDir := filepath.Join(dir, "opt", "node")
	for _, c := range []struct {
		name  string
		args  []string
		want  []string
		binds []string
	}{
		{"under node_modules", []string{inNM, "/workspace"}, []string{inNM, "/workspace"}, []string{nodeDir, nm}},
		{"a checkout", []string{"--enable-source-maps", checkout}, []string{"--enable-source-maps", checkout}, []string{nodeDir, repo}},
		{"-r MODULE first", []string{"-r", "x", checkout}, []string{"-r", "x", checkout}, []string{nodeDir, repo}},
		{"eval", []string{"-e", "1"}, []string{"-e", "1"}, []string{nodeDir}},
	} {
		s, err := r.Resolve("node", c.args)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if s.Command != node || !reflect.DeepEqual(s.Args, c.want) || !reflect.DeepEqual(s.Binds, c.binds) {
			t.Errorf("%s: %+v, want args %v binds %v", c.name, s, c.want, c.binds)
		}
	}
	wd, _ := os.Getwd()
	defer os.Chdir(wd)
	os.Chdir(repo)
	s, err := r.Resolve("node", []string{"build/index.js"})
	if err != nil || s.Args[0] != checkout {
		t.Errorf("a relative script: %+v %v", s, err)
	}
	if _, err := r.Resolve("node", []string{filepath.Join(repo, "absent.js")}); err == nil {
		t.Error("an absent script resolved")
	}
}

// TestResolveVirtualenv: a virtualenv's python keeps its own path (Python
// finds pyvenv.cfg from it) and binds the virtualenv; a console script of
// a virtualenv binds it too (README "MCP servers as tsh tools").
func TestResolveVirtualenv(t *testing.T) {
	dir := t.TempDir()
	venv := filepath.Join(dir, "venv")
	os.MkdirAll(filepath.Join(venv, "bin"), 0o755)
	os.WriteFile(filepath.Join(venv, "pyvenv.cfg"), []byte("home = /usr/bin\n"), 0o644)
	sys := filepath.Join(dir, "pyenv", "bin", "python3.11")
	base := filepath.Join(dir, "pyenv")
	os.MkdirAll(filepath.Dir(sys), 0o755)
	os.WriteFile(sys, []byte("\x7fELF"), 0o755)
	py := filepath.Join(venv, "bin", "python3")
	os.Symlink(sys, py)
	script := filepath.Join(venv, "bin", "mcp-server-fetch")
	os.WriteFile(script, []byte("#!"+py+"\nimport x\n"), 0o755)
	r := Resolver{LookPath: func(string) (string, error) { return "", errors.New("not found") }}
	s, err := r.Resolve(py, []string{"-m", "srv"})
	if err != nil || s.Command != py || !reflect.DeepEqual(s.Binds, []string{venv, base}) {
		t.Errorf("venv python: %+v %v", s, err)
	}
	s, err = r.Resolve(script, nil)
	if err != nil || s.Command != script || !reflect.DeepEqual(s.Binds, []string{venv, base}) {
		t.Errorf("console script: %+v %v", s, err)
	}
	os.Remove(filepath.Join(venv, "pyvenv.cfg"))
	if s, err := r.Resolve(py, nil); err != nil || s.Command != sys || len(s.Binds) != 0 {
		t.Errorf("not a virtualenv: %+v %v", s, err)
	}
}

// TestResolveDownloaders: uvx, uv tool run, pipx run, bunx, pnpm/yarn dlx
// would fetch code at every start: refused with the install line.
func TestResolveDownloaders(t *testing.T) {
	r := Resolver{LookPath: func(n string) (string, error) { return "/usr/bin/" + n, nil }}
	for _, c := range []struct {
		cmd  string
		args []string
		fix  string
	}{
		{"uvx", []string{"mcp-server-fetch"}, "uv tool install mcp-server-fetch"},
		{"uv", []string{"tool", "run", "--quiet", "mcp-server-git"}, "uv tool install mcp-server-git"},
		{"pipx", []string{"run", "mcp-server-time"}, "pipx install mcp-server-time"},
		{"bunx", []string{"-y", "@x/server"}, "npm install -g @x/server"},
		{"/usr/bin/pnpm", []string{"dlx", "@x/server"}, "npm install -g @x/server"},
	} {
		_, err := r.Resolve(c.cmd, c.args)
		if !errors.Is(err, ErrDownload) || !strings.Contains(err.Error(), c.fix) {
			t.Errorf("%s %v: %v", c.cmd, c.args, err)
		}
	}
}
