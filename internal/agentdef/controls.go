package agentdef

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/limits"
)

// The control files of a definition, one parser each, in the order Load
// reads them.

// controls are the control files Load reads, in this order, each with its
// parser (given the file's bytes when it is there); an entry without a
// name is a check between them. A parser's error says which file and why,
// wrapping ErrInvalid: anything invalid fails the definition (closed).
var controls = []struct {
	name  string
	parse func(d *Def, b []byte) error
}{
	{"abi", parseABI},
	{"acp.json", parseACPFile},
	{"model", parseModel},
	{"", checkKind},
	{"approval", parseApproval},
	{"env", parseEnvFile},
	{"tools", parseTools},
	{"path", parsePath},
	{"window", func(d *Def, b []byte) error { d.Window = b; return nil }},
	{"label", oneLineInto("label", func(d *Def) *string { return &d.Label })},
	{"cwd", oneLineInto("cwd", func(d *Def) *string { return &d.Cwd })},
	{"root", oneLineInto("root", func(d *Def) *string { return &d.Root })},
	{"uid", idInto("uid", func(d *Def) *int { return &d.UID })},
	{"gid", idInto("gid", func(d *Def) *int { return &d.GID })},
	{"groups", parseGroups},
	{"mount", parseMountFile},
	{"limits", parseLimitsFile},
}

// parseABI: .d/abi names the envelope or the ACP protocol. spec: X1
func parseABI(d *Def, b []byte) error {
	v, err := OneLine(b)
	if err != nil || !slices.Contains(ABIs, v) {
		return fmt.Errorf(".d/abi must be exactly %q or %q: %w", ABI+"\n", ABIACP+"\n", ErrInvalid)
	}
	d.Kind, d.ABI = KindExec, v
	return nil
}

// parseACPFile: .d/acp.json, only beside .d/abi acp-v1.
func parseACPFile(d *Def, b []byte) error {
	if d.ABI != ABIACP {
		return fmt.Errorf(".d/acp.json needs .d/abi %s: %w", ABIACP, ErrInvalid)
	}
	var err error
	if d.ACP, err = ParseACP(b); err != nil {
		return fmt.Errorf("%v: %w", err, ErrInvalid)
	}
	return nil
}

func parseModel(d *Def, b []byte) (err error) {
	if d.Models, err = Lines(b, checkModel); err != nil {
		return fmt.Errorf(".d/model: %v: %w", err, ErrInvalid)
	}
	return nil
}

// checkKind: a definition is an executable agent (.d/abi) or a model one.
func checkKind(d *Def, _ []byte) error {
	if d.Kind == "" {
		if len(d.Models) == 0 {
			return fmt.Errorf("neither .d/abi nor .d/model: %w", ErrInvalid)
		}
		d.Kind = KindModel
	}
	return nil
}

// parseApproval: auto or ask. spec: A1
func parseApproval(d *Def, b []byte) error {
	v, err := OneLine(b)
	if err != nil || (v != "auto" && v != "ask") {
		return fmt.Errorf(".d/approval must be auto or ask: %w", ErrInvalid)
	}
	d.Approval = v
	return nil
}

func parseEnvFile(d *Def, b []byte) (err error) {
	if d.Env, err = ParseEnv(b); err != nil {
		return fmt.Errorf(".d/env: %v: %w", err, ErrInvalid)
	}
	return nil
}

func parseTools(d *Def, b []byte) (err error) {
	if d.Tools, err = Lines(b, func(s string) error { return layout.CheckName("tool", s) }); err != nil {
		return fmt.Errorf(".d/tools: %v: %w", err, ErrInvalid)
	}
	return nil
}

func parsePath(d *Def, b []byte) error {
	v, err := OneLine(b)
	if err == nil {
		err = CheckCTXPath(v)
	}
	if err != nil {
		return fmt.Errorf(".d/path: %v: %w", err, ErrInvalid)
	}
	d.CTXPath = v
	return nil
}

// oneLineInto parses a one-line control file into the field at(d).
func oneLineInto(ctl string, at func(*Def) *string) func(*Def, []byte) error {
	return func(d *Def, b []byte) error {
		v, err := OneLine(b)
		if err != nil {
			return fmt.Errorf(".d/%s: %v: %w", ctl, err, ErrInvalid)
		}
		*at(d) = v
		return nil
	}
}

// idInto parses a decimal uid or gid into the field at(d).
func idInto(ctl string, at func(*Def) *int) func(*Def, []byte) error {
	return func(d *Def, b []byte) error {
		v, err := OneLine(b)
		n, cerr := strconv.Atoi(v)
		if err != nil || cerr != nil || n < 0 || strconv.Itoa(n) != v {
			return fmt.Errorf(".d/%s must be one decimal id: %w", ctl, ErrInvalid)
		}
		*at(d) = n
		return nil
	}
}

func parseGroups(d *Def, b []byte) error {
	gs, err := Lines(b, func(s string) error {
		if n, err := strconv.Atoi(s); err != nil || n < 0 || strconv.Itoa(n) != s {
			return fmt.Errorf("group %q: want a decimal gid", s)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf(".d/groups: %v: %w", err, ErrInvalid)
	}
	d.Groups = nil
	for _, g := range gs {
		n, _ := strconv.Atoi(g)
		d.Groups = append(d.Groups, n)
	}
	return nil
}

func parseMountFile(d *Def, b []byte) error {
	mounts, net, err := ParseMount(b)
	if err != nil {
		return fmt.Errorf(".d/mount: %v: %w", err, ErrInvalid)
	}
	d.Mounts, d.Network, d.NetLocal = mounts, net.Public, net.Local
	return nil
}

// parseLimitsFile: an unknown key or a bad value fails closed, never
// unlimited.
func parseLimitsFile(d *Def, b []byte) (err error) {
	if d.Limits, err = limits.Parse(b); err != nil {
		return fmt.Errorf(".d/limits: %v: %w", err, ErrInvalid)
	}
	return nil
}
