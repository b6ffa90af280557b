package agentdef

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/limits"
	"github.com/cortexfs/ctx/internal/policy"
	"github.com/cortexfs/ctx/internal/toolset"
	"github.com/cortexfs/ctx/internal/workspace"
)

// CreateOptions are the flags of `ctx agent create`.
type CreateOptions struct {
	Exec string // host path of the executable to install as the agent object
	ABI  string // .d/abi of an executable agent: "" (sdk-envelope-v1) or acp-v1
	// ACP is .d/acp.json of an acp-v1 agent (how to start an installed
	// agent: command, arguments, read-only binds, secret env keys); nil:
	// the agent object runs with no arguments.
	ACP      *ACPLaunch
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
	// The same checks Load applies, duplicates included: create never
	// writes a definition that does not load.
	if _, err := Lines([]byte(strings.Join(o.Models, "\n")+"\n"), checkModel); len(o.Models) > 0 && err != nil {
		return fmt.Errorf("create %q: --model: %v: %w", name, err, ErrInvalid)
	}
	seen := map[string]bool{}
	for _, t := range o.Tools {
		if err := layout.CheckName("tool", t); err != nil {
			return err
		}
		if seen[t] {
			return fmt.Errorf("create %q: --tools: duplicate %q: %w", name, t, ErrInvalid)
		}
		seen[t] = true
	}
	if o.ABI != "" && (o.Exec == "" || !slices.Contains(ABIs, o.ABI)) {
		return fmt.Errorf("create %q: --abi %q: want %s or %s, with --exec: %w", name, o.ABI, ABI, ABIACP, ErrInvalid)
	}
	var acpJSON []byte
	if o.ACP != nil {
		if o.ABI != ABIACP {
			return fmt.Errorf("create %q: a launch declaration needs --abi %s: %w", name, ABIACP, ErrInvalid)
		}
		var err error
		if acpJSON, err = o.ACP.Marshal(); err != nil {
			return fmt.Errorf("create %q: %w", name, err)
		}
	}
	if o.Approval != "" && o.Approval != "auto" && o.Approval != "ask" {
		return fmt.Errorf("create %q: --approval must be auto or ask: %w", name, ErrInvalid)
	}
	if _, err := os.Lstat(l.AgentObject(name)); err == nil {
		return fmt.Errorf("create %q: %w", name, ErrExists)
	}
	// Read the executable before anything is written: a create that fails
	// must not leave control files for the next create of this name.
	var object []byte
	if o.Exec != "" {
		const maxExec = 512 << 20
		src, err := os.Open(o.Exec)
		if err != nil {
			return fmt.Errorf("create %q: %w", name, err)
		}
		object, err = io.ReadAll(io.LimitReader(src, maxExec+1))
		src.Close()
		if err != nil {
			return fmt.Errorf("create %q: read %s: %w", name, o.Exec, err)
		}
		if len(object) > maxExec {
			return fmt.Errorf("create %q: %s is larger than %d bytes: %w", name, o.Exec, maxExec, ErrInvalid)
		}
	} else {
		object = []byte(fmt.Sprintf("Model agent %s (%s).\n", name, strings.Join(o.Models, ", ")))
	}
	if err := os.MkdirAll(l.AgentControl(name), 0o755); err != nil {
		return fmt.Errorf("create %q: %w", name, err)
	}
	window := o.Window
	if window == "" {
		window = "auto"
	}
	// The files create owns; one that is not written now is removed, so a
	// control directory left by an earlier failed create or an interrupted
	// rm cannot change the kind, tools or approval of the new agent.
	files := []struct{ name, value string }{
		{"window", window + "\n"}, // spec: W1
		{"approval", ""}, {"tools", ""}, {"model", ""}, {"abi", ""}, {"policy", ""}, {"acp.json", string(acpJSON)},
	}
	if o.Approval != "" {
		files[1].value = o.Approval + "\n"
	}
	if len(o.Tools) > 0 {
		files[2].value = strings.Join(o.Tools, "\n") + "\n"
	}
	if len(o.Models) > 0 {
		files[3].value = strings.Join(o.Models, "\n") + "\n"
	}
	if o.Exec != "" {
		files[4].value = ABI + "\n"
		if o.ABI != "" {
			files[4].value = o.ABI + "\n"
		}
	} else {
		// A model agent may use the standard toolset (and the
		// tools named with --tools) out of the box; the file says how to
		// narrow or widen it.
		files[5].value = toolset.DefaultPolicy(o.Tools)
	}
	var written []string
	undo := func(err error) error {
		for _, p := range written {
			_ = os.Remove(p)
		}
		return fmt.Errorf("create %q: %w", name, err)
	}
	for _, f := range files {
		p := filepath.Join(l.AgentControl(name), f.name)
		if f.value == "" {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return undo(err)
			}
			continue
		}
		if err := atomicfile.WriteFile(p, []byte(f.value), 0o644); err != nil {
			return undo(err)
		}
		written = append(written, p)
	}
	mode := fs.FileMode(0o644)
	if o.Exec != "" {
		mode = 0o755
	}
	if err := atomicfile.WriteFile(l.AgentObject(name), object, mode); err != nil {
		return undo(err)
	}
	return nil
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
	b, err := ReadControl(filepath.Join(l.AgentControl(name), control))
	if errors.Is(err, fs.ErrNotExist) {
		// An absent control file means its default, which Load uses: say
		// that, not the file's absence.
		switch control {
		case "approval":
			return []byte("auto\n"), nil
		case "path":
			return []byte(l.DefaultCTXPath() + "\n"), nil
		case "model":
			// A model agent always has one: this agent runs its object.
			return nil, fmt.Errorf("agent %q has no model: it runs the executable %s (an agent's kind is chosen by `ctx agent create --exec|--model`): %w", name, l.AgentObject(name), ErrNotSet)
		}
		return nil, fmt.Errorf("agent %q has no .d/%s (not set; `ctx agent set %s %s VALUE` sets it): %w", name, control, name, control, ErrNotSet)
	}
	return b, err
}

// ErrNotSet: a control file that is absent and has no default.
var ErrNotSet = errors.New("not set")

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
	// One set at a time per definition: window and model are checked as a
	// pair (W5), so a check and its write must not interleave with another's.
	if err := os.MkdirAll(l.AgentControl(name), 0o755); err != nil {
		return err
	}
	unlock, err := lockDir(l.AgentControl(name))
	if err != nil {
		return err
	}
	defer unlock()
	if control == "tools" || control == "groups" || control == "model" {
		value = strings.Join(strings.Split(strings.TrimSuffix(value, "\n"), ","), "\n")
	}
	if value != "" && !strings.HasSuffix(value, "\n") {
		value += "\n"
	}
	b := []byte(value)

	switch control {
	case "abi":
		if v, e := OneLine(b); e != nil || !slices.Contains(ABIs, v) {
			err = fmt.Errorf("abi must be %s or %s", ABI, ABIACP)
		}
	case "acp.json":
		_, err = ParseACP(b)
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
	case "uid", "gid":
		var v string
		if v, err = OneLine(b); err == nil {
			if n, cerr := strconv.Atoi(v); cerr != nil || n < 0 || strconv.Itoa(n) != v {
				err = fmt.Errorf("%s must be one decimal id", control)
			}
		}
	case "cwd":
		var v string
		if v, err = OneLine(b); err == nil && !filepath.IsAbs(v) {
			err = fmt.Errorf("cwd %q: not absolute", v)
		}
	case "root":
		var v string
		if v, err = OneLine(b); err == nil && v != "/" {
			err = fmt.Errorf("root %q: only / is supported", v)
		}
	case "label":
		var v string
		if v, err = OneLine(b); err == nil {
			err = layout.CheckName("label", v) // what policy.ReadLabel accepts
		}
	case "mount":
		_, _, err = ParseMount(b)
	case "limits":
		_, err = limits.Parse(b)
	case "protect":
		_, err = workspace.ParseGrants(b)
	case "policy":
		_, err = policy.Parse(policy.AgentPolicy, control, b)
	case "window":
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

// lockDir takes an exclusive flock on a directory until the returned func runs.
func lockDir(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}
