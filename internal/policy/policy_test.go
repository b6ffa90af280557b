package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mustParse(t *testing.T, kind Kind, s string) *Policy {
	t.Helper()
	p, err := Parse(kind, "f", []byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseInvalid(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind Kind
		in   string
		line string // want "f:<line>" in the error
	}{
		{"unknown directive", AgentPolicy, "allow tool a\npermit tool b\n", "f:2"},
		{"typo subject", AgentPolicy, "allow tools a\n", "f:1"},
		{"label in agent policy", AgentPolicy, "# c\nallow label x\n", "f:2"},
		{"tool in tool policy", ToolPolicy, "allow tool x\n", "f:1"},
		{"two words", AgentPolicy, "allow tool\n", "f:1"},
		{"four words", AgentPolicy, "allow tool a b\n", "f:1"},
		{"trailing comment", AgentPolicy, "allow tool a # x\n", "f:1"},
		{"bad name", AgentPolicy, "allow tool ../x\n", "f:1"},
		{"glob", AgentPolicy, "allow tool b*\n", "f:1"},
		{"mcp glob in tool part", AgentPolicy, "allow tool fs.b*\n", "f:1"},
		{"mcp no server", AgentPolicy, "allow tool .*\n", "f:1"},
		{"mcp star server", AgentPolicy, "allow tool *.x\n", "f:1"},
		{"mcp server star in a label", ToolPolicy, "allow label fs.*\n", "f:1"},
		{"CR", AgentPolicy, "allow tool a\r\n", "f:1"},
		{"NUL", AgentPolicy, "allow tool a\x00\n", "f:1"},
		{"bad utf8", AgentPolicy, "\n\xff\n", "f:2"},
		{"uppercase verb", AgentPolicy, "ALLOW tool a\n", "f:1"},
		{"too large", AgentPolicy, strings.Repeat("#\n", MaxSize), "f:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.kind, "f", []byte(tc.in))
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), tc.line) {
				t.Fatalf("error %q: want prefix %q and ErrInvalid", err, tc.line)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name        string
		agent, tool *string
		toolName    string
		label       string
		allowed     bool
		layer       string
	}{
		{"both absent", nil, nil, "bash", "", true, ""},
		{"agent allows", s("allow tool bash\n"), nil, "bash", "", true, ""},
		{"agent no match denies", s("allow tool grep\n"), nil, "bash", "", false, LayerAgent},
		{"agent empty file denies", s("# nothing\n\n"), nil, "bash", "", false, LayerAgent},
		{"agent star", s("allow tool *\n"), nil, "bash", "", true, ""},
		{"deny wins over star", s("allow tool *\ndeny tool bash\n"), nil, "bash", "", false, LayerAgent},
		{"deny wins regardless of order", s("deny tool bash\nallow tool bash\n"), nil, "bash", "", false, LayerAgent},
		{"deny star", s("allow tool bash\ndeny tool *\n"), nil, "bash", "", false, LayerAgent},
		{"other tool unaffected", s("allow tool *\ndeny tool rm\n"), nil, "bash", "", true, ""},
		{"tool policy label", nil, s("allow label dev\n"), "bash", "dev", true, ""},
		{"tool policy wrong label", nil, s("allow label dev\n"), "bash", "ops", false, LayerTool},
		{"tool policy no label", nil, s("allow label dev\n"), "bash", "", false, LayerTool},
		{"tool policy star covers unlabelled", nil, s("allow label *\n"), "bash", "", true, ""},
		{"tool deny label", nil, s("allow label *\ndeny label intern\n"), "bash", "intern", false, LayerTool},
		{"intersection: agent ok, tool denies", s("allow tool bash\n"), s("deny label *\n"), "bash", "x", false, LayerTool},
		{"intersection: both allow", s("allow tool bash\n"), s("allow label x\n"), "bash", "x", true, ""},
		{"agent checked first", s("deny tool bash\n"), s("deny label *\n"), "bash", "x", false, LayerAgent},
		{"whitespace and tabs", s("  allow\ttool   bash  \n"), nil, "bash", "", true, ""},
		{"no final newline", s("allow tool bash"), nil, "bash", "", true, ""},
		// spec: MCP tools SERVER.TOOL and SERVER.*
		{"mcp server star", s("allow tool fs.*\n"), nil, "fs.read_file", "", true, ""},
		{"mcp server star not the bare name", s("allow tool fs.*\n"), nil, "fs", "", false, LayerAgent},
		{"mcp server star not a prefix", s("allow tool fs.*\n"), nil, "fsx.read", "", false, LayerAgent},
		{"mcp deny one tool", s("allow tool fs.*\ndeny tool fs.write_file\n"), nil, "fs.write_file", "", false, LayerAgent},
		{"mcp deny server wins over star", s("allow tool *\ndeny tool fs.*\n"), nil, "fs.read_file", "", false, LayerAgent},
		{"mcp star covers", s("allow tool *\n"), nil, "everything.echo", "", true, ""},
		{"mcp long tool name", s("allow tool srv.a-very-long-tool-name-that-is-over-sixty-four-characters-long-indeed-yes\n"), nil, "srv.a-very-long-tool-name-that-is-over-sixty-four-characters-long-indeed-yes", "", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ap, tp *Policy
			if tc.agent != nil {
				ap = mustParse(t, AgentPolicy, *tc.agent)
			}
			if tc.tool != nil {
				tp = mustParse(t, ToolPolicy, *tc.tool)
			}
			d := Decide(ap, tp, tc.toolName, tc.label)
			if d.Allowed != tc.allowed || d.Layer != tc.layer {
				t.Fatalf("Decide = %+v, want allowed=%v layer=%q", d, tc.allowed, tc.layer)
			}
			if d.Reason == "" {
				t.Fatal("decision without a reason")
			}
		})
	}
}

func s(v string) *string { return &v }

// spec: V3 — an invalid policy file fails every call closed and names file:line.
func TestDecideFilesFailsClosed(t *testing.T) {
	dir := t.TempDir()
	ap := filepath.Join(dir, "agent.policy")
	tp := filepath.Join(dir, "tool.policy")
	if err := os.WriteFile(ap, []byte("allow tool *\nallw tool x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := DecideFiles(ap, "", "bash", "")
	if d.Allowed || d.Layer != LayerAgent || !strings.Contains(d.Reason, ap+":2") {
		t.Fatalf("invalid agent policy: %+v", d)
	}
	if err := os.WriteFile(ap, []byte("allow tool *\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tp, []byte("allow label\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d = DecideFiles(ap, tp, "bash", "x")
	if d.Allowed || d.Layer != LayerTool || !strings.Contains(d.Reason, tp+":1") {
		t.Fatalf("invalid tool policy: %+v", d)
	}
	// Absent files allow.
	if d := DecideFiles(filepath.Join(dir, "none"), filepath.Join(dir, "none2"), "bash", ""); !d.Allowed {
		t.Fatalf("absent files: %+v", d)
	}
	// A symlinked or non-regular policy is not read: fail closed.
	if err := os.Symlink(ap, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if d := DecideFiles(filepath.Join(dir, "link"), "", "bash", ""); d.Allowed {
		t.Fatalf("symlinked policy: %+v", d)
	}
	if d := DecideFiles(dir, "", "bash", ""); d.Allowed {
		t.Fatalf("directory as policy: %+v", d)
	}
}

func TestLabel(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"dev\n", "dev", true},
		{"dev", "", false},
		{"dev\n\n", "", false},
		{" dev\n", "", false},
		{"\n", "", false},
		{"a/b\n", "", false},
	} {
		got, err := ParseLabel("label", []byte(tc.in))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseLabel(%q) = %q, %v", tc.in, got, err)
		}
	}
	dir := t.TempDir()
	if l, err := ReadLabel(filepath.Join(dir, "label")); err != nil || l != "" {
		t.Fatalf("absent label: %q %v", l, err)
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"", "\n", "# c\n", "allow tool *\n", "deny tool bash\nallow tool *\n",
		"allow label dev\n", "deny label *\n", "allow tool a b\n", "permit x y\n",
		"allow tool a\r\n", "\xff", "  allow\ttool\tx  \n", "allow tool ../x\n",
	} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	f.Fuzz(func(t *testing.T, data string, tool bool) {
		kind := AgentPolicy
		if tool {
			kind = ToolPolicy
		}
		p, err := Parse(kind, "fuzz", []byte(data))
		if err != nil {
			if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "fuzz:") {
				t.Fatalf("error without file name or class: %v", err)
			}
			return
		}
		// Invariants: every rule is of the file's kind and reparses to itself;
		// deny wins; an empty rule set denies.
		var text strings.Builder
		for _, r := range p.Rules {
			if (r.Subject == "label") != tool || (r.Pattern != "*" && strings.ContainsAny(r.Pattern, " \t#*/")) {
				t.Fatalf("bad rule %+v", r)
			}
			text.WriteString(r.String() + "\n")
		}
		q, err := Parse(kind, "fuzz", []byte(text.String()))
		if err != nil || len(q.Rules) != len(p.Rules) {
			t.Fatalf("rules do not reparse: %v", err)
		}
		for _, r := range p.Rules {
			ok, _ := p.Match(r.Pattern)
			if !r.Allow && ok {
				t.Fatalf("deny %s did not win", r.Pattern)
			}
		}
		if len(p.Rules) == 0 {
			if ok, _ := p.Match("x"); ok {
				t.Fatal("empty policy allowed")
			}
		}
	})
}
