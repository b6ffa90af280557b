package agentdef

import (
	"errors"
	"reflect"
	"testing"
)

// TestLoadACP: .d/abi acp-v1 loads as an executable agent with its ABI;.
// d/acp.json is validated and needs acp-v1. spec: X1
func TestLoadACP(t *testing.T) {
	for _, tc := range []struct {
		name     string
		controls map[string]string
		ok       bool
		acp      *ACPLaunch
	}{
		{"abi only", map[string]string{"abi": "acp-v1\n"}, true, nil},
		{"launch", map[string]string{"abi": "acp-v1\n", "acp.json": `{"command":"/usr/bin/node","args":["/opt/a/x.js","--acp"],"binds":["/opt/a"],"env":["GEMINI_API_KEY"]}`},
			true, &ACPLaunch{Command: "/usr/bin/node", Args: []string{"/opt/a/x.js", "--acp"}, Binds: []string{"/opt/a"}, Env: []string{"GEMINI_API_KEY"}}},
		{"args only", map[string]string{"abi": "acp-v1\n", "acp.json": `{"args":["--experimental-acp"]}`}, true, &ACPLaunch{Args: []string{"--experimental-acp"}}},
		{"acp.json without acp-v1", map[string]string{"abi": "sdk-envelope-v1\n", "acp.json": `{}`}, false, nil},
		{"unknown field", map[string]string{"abi": "acp-v1\n", "acp.json": `{"cmd":"/x"}`}, false, nil},
		{"relative command", map[string]string{"abi": "acp-v1\n", "acp.json": `{"command":"node"}`}, false, nil},
		{"bind over the workspace", map[string]string{"abi": "acp-v1\n", "acp.json": `{"binds":["/workspace/x"]}`}, false, nil},
		{"bind of /", map[string]string{"abi": "acp-v1\n", "acp.json": `{"binds":["/"]}`}, false, nil},
		{"CTX_ env key", map[string]string{"abi": "acp-v1\n", "acp.json": `{"env":["CTX_RUN"]}`}, false, nil},
		{"two values", map[string]string{"abi": "acp-v1\n", "acp.json": `{} {}`}, false, nil},
		{"acp-v2", map[string]string{"abi": "acp-v2\n"}, false, nil},
	} {
		l := testLayout(t)
		execAgent(t, l, "a", tc.controls)
		d, err := Load(l, "a")
		if !tc.ok {
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: want ErrInvalid, got %v", tc.name, err)
			}
			continue
		}
		if err != nil || d.Kind != KindExec || d.ABI != ABIACP || !reflect.DeepEqual(d.ACP, tc.acp) {
			t.Errorf("%s: %+v %v", tc.name, d, err)
		}
	}
}

// TestCreateACP: create --abi acp-v1 writes .d/abi and .d/acp.json; a
// launch without acp-v1, or --abi without --exec, is refused.
func TestCreateACP(t *testing.T) {
	l := testLayout(t)
	exe := writeExe(t)
	launch := &ACPLaunch{Command: "/usr/bin/node", Args: []string{"/opt/a/x.js"}, Binds: []string{"/opt/a"}}
	if err := Create(l, "a", CreateOptions{Exec: exe, ABI: ABIACP, ACP: launch}); err != nil {
		t.Fatal(err)
	}
	d, err := Load(l, "a")
	if err != nil || d.ABI != ABIACP || !reflect.DeepEqual(d.ACP, launch) {
		t.Fatalf("%+v %v", d, err)
	}
	if err := Create(l, "b", CreateOptions{Exec: exe, ACP: launch}); !errors.Is(err, ErrInvalid) {
		t.Errorf("launch without acp-v1: %v", err)
	}
	if err := Create(l, "c", CreateOptions{Models: []string{"openai/gpt-4o"}, ABI: ABIACP}); !errors.Is(err, ErrInvalid) {
		t.Errorf("--abi without --exec: %v", err)
	}
	if err := Create(l, "e", CreateOptions{Exec: exe}); err != nil {
		t.Fatal(err)
	}
	if d, err := Load(l, "e"); err != nil || d.ABI != ABI {
		t.Errorf("default ABI: %+v %v", d, err)
	}
}

func writeExe(t *testing.T) string {
	p := t.TempDir() + "/agent"
	write(t, p, "#!/bin/sh\n")
	return p
}
