package agentdef

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/internal/layout"
)

// CreateOptions are the flags of `ctx agent create`.
type CreateOptions struct {
	Exec     string   // host path of the executable to install as the agent object
	Models   []string // model candidates, preferred first
	Approval string   // "", auto or ask
	Window   string   // "", auto or N
	Tools    []string
}

// ErrExists means the agent already exists.
var ErrExists = errors.New("agent already exists")

// Create writes a new definition. Names that could be confused with the
// socket or control directory of another agent (ending in .d or .sock) are refused.
func Create(l layout.Layout, name string, o CreateOptions) error {
	if err := layout.CheckName("agent", name); err != nil {
		return err
	}
	if strings.HasSuffix(name, ".d") || strings.HasSuffix(name, ".sock") {
		return fmt.Errorf("agent name %q: may not end in .d or .sock: %w", name, layout.ErrBadName)
	}
	if (o.Exec == "") == (len(o.Models) == 0) && o.Exec == "" {
		return fmt.Errorf("create %q: give --exec PATH or --model MODEL: %w", name, ErrInvalid)
	}
	for _, m := range o.Models {
		if err := checkModel(m); err != nil {
			return fmt.Errorf("create %q: %v: %w", name, err, ErrInvalid)
		}
	}
	for _, t := range o.Tools {
		if err := layout.CheckName("tool", t); err != nil {
			return err
		}
	}
	if o.Approval != "" && o.Approval != "auto" && o.Approval != "ask" {
		return fmt.Errorf("create %q: --approval must be auto or ask: %w", name, ErrInvalid)
	}
	if _, err := os.Lstat(l.AgentObject(name)); err == nil {
		return fmt.Errorf("create %q: %w", name, ErrExists)
	}
	if err := os.MkdirAll(l.AgentControl(name), 0o755); err != nil {
		return fmt.Errorf("create %q: %w", name, err)
	}
	ctl := func(c, v string) error {
		return atomicfile.WriteFile(filepath.Join(l.AgentControl(name), c), []byte(v), 0o644)
	}
	window := o.Window
	if window == "" {
		window = "auto"
	}
	if err := ctl("window", window+"\n"); err != nil { // spec: W1
		return err
	}
	if o.Approval != "" {
		if err := ctl("approval", o.Approval+"\n"); err != nil {
			return err
		}
	}
	if len(o.Tools) > 0 {
		if err := ctl("tools", strings.Join(o.Tools, "\n")+"\n"); err != nil {
			return err
		}
	}
	if len(o.Models) > 0 {
		if err := ctl("model", strings.Join(o.Models, "\n")+"\n"); err != nil {
			return err
		}
	}
	if o.Exec != "" {
		if err := ctl("abi", ABI+"\n"); err != nil {
			return err
		}
		src, err := os.Open(o.Exec)
		if err != nil {
			return fmt.Errorf("create %q: %w", name, err)
		}
		defer src.Close()
		b, err := io.ReadAll(io.LimitReader(src, 512<<20))
		if err != nil {
			return fmt.Errorf("create %q: read %s: %w", name, o.Exec, err)
		}
		return atomicfile.WriteFile(l.AgentObject(name), b, 0o755)
	}
	desc := fmt.Sprintf("Model agent %s (%s).\n", name, strings.Join(o.Models, ", "))
	return atomicfile.WriteFile(l.AgentObject(name), []byte(desc), 0o644)
}

// Remove deletes the definition (object and control directory). Sessions
// under home/ are kept (L6: removing a transport or definition deletes no session).
func Remove(l layout.Layout, name string) error {
	if err := layout.CheckName("agent", name); err != nil {
		return err
	}
	if _, err := os.Lstat(l.AgentObject(name)); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("agent %q: %w", name, ErrNoSuchAgent)
	}
	if err := os.Remove(l.AgentObject(name)); err != nil {
		return fmt.Errorf("rm %q: %w", name, err)
	}
	if err := os.RemoveAll(l.AgentControl(name)); err != nil {
		return fmt.Errorf("rm %q: %w", name, err)
	}
	return atomicfile.SyncDir(l.AgentDir())
}

// List returns the names of the definitions under agent/.
func List(l layout.Layout) ([]string, error) {
	ents, err := os.ReadDir(l.AgentDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if !e.Type().IsRegular() || layout.CheckName("agent", n) != nil || strings.HasPrefix(n, ".") {
			continue
		}
		out = append(out, n)
	}
	return out, nil
}

// Get returns a control file's raw bytes.
func Get(l layout.Layout, name, control string) ([]byte, error) {
	if err := layout.CheckName("agent", name); err != nil {
		return nil, err
	}
	if err := checkControlName(control); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(l.AgentObject(name)); err != nil {
		return nil, fmt.Errorf("agent %q: %w", name, ErrNoSuchAgent)
	}
	return readControl(filepath.Join(l.AgentControl(name), control))
}

func checkControlName(control string) error {
	for _, c := range Controls {
		if c == control {
			return nil
		}
	}
	return fmt.Errorf("unknown control %q (one of %s): %w", control, strings.Join(Controls, " "), ErrInvalid)
}

// Validator checks the new value of a control file in the context of the
// whole definition; window and model are checked together (W5) by the
// caller-supplied function.
type Validator func(control string, value []byte) error

// Set validates and atomically replaces one control file. value is the file
// content as written by the user: a missing trailing LF is added; for tools
// and groups a comma-separated list becomes one name per line.
func Set(l layout.Layout, name, control, value string, extra Validator) error {
	if err := layout.CheckName("agent", name); err != nil {
		return err
	}
	if err := checkControlName(control); err != nil {
		return err
	}
	if _, err := os.Lstat(l.AgentObject(name)); err != nil {
		return fmt.Errorf("agent %q: %w", name, ErrNoSuchAgent)
	}
	if control == "tools" || control == "groups" || control == "model" {
		value = strings.Join(strings.Split(strings.TrimSuffix(value, "\n"), ","), "\n")
	}
	if value != "" && !strings.HasSuffix(value, "\n") {
		value += "\n"
	}
	b := []byte(value)
	var err error
	switch control {
	case "abi":
		if v, e := OneLine(b); e != nil || v != ABI {
			err = fmt.Errorf("abi must be %s", ABI)
		}
	case "approval":
		if v, e := OneLine(b); e != nil || (v != "auto" && v != "ask") {
			err = errors.New("approval must be auto or ask")
		}
	case "env":
		_, err = ParseEnv(b)
	case "tools", "groups":
		_, err = Lines(b, func(s string) error { return layout.CheckName(control, s) })
	case "model":
		_, err = Lines(b, checkModel)
	case "path":
		var v string
		if v, err = OneLine(b); err == nil {
			err = CheckCTXPath(v)
		}
	case "label", "uid", "gid", "cwd", "root", "window":
		_, err = OneLine(b)
	}
	if err == nil && extra != nil {
		err = extra(control, b)
	}
	if err != nil {
		return fmt.Errorf("set %s %s: %v: %w", name, control, err, ErrInvalid)
	}
	if err := os.MkdirAll(l.AgentControl(name), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(l.AgentControl(name), control), b, 0o644)
}
