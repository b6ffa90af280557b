package cli

import (
	"errors"
)

var errNotYet = errors.New("not available in this build yet")

// StartCmd is `ctx agent start`.
type StartCmd struct {
	Name    string `arg:""`
	Session string `default:"default"`
	Cwd     string `help:"Directory bound at /workspace (default: the current directory)."`
}

func (c *StartCmd) Run(env *Env) error { return Exit(ExitUsage, errNotYet) }

// StopCmd is `ctx agent stop`.
type StopCmd struct {
	Name    string `arg:""`
	Session string `default:"default"`
}

func (c *StopCmd) Run(env *Env) error { return Exit(ExitUsage, errNotYet) }

// WatchCmd is `ctx agent watch`.
type WatchCmd struct {
	Name    string `arg:""`
	Session string `default:"default"`
}

func (c *WatchCmd) Run(env *Env) error { return Exit(ExitUnavailable, errNotYet) }

// AttachCmd is `ctx agent attach`.
type AttachCmd struct {
	Name    string `arg:""`
	Session string `default:"default"`
}

func (c *AttachCmd) Run(env *Env) error { return Exit(ExitUnavailable, errNotYet) }

// TerminalCreateCmd is `ctx terminal create`.
type TerminalCreateCmd struct {
	Agent   string `arg:""`
	Session string `default:"default"`
}

func (c *TerminalCreateCmd) Run(env *Env) error { return Exit(ExitUsage, errNotYet) }

// TerminalStatusCmd is `ctx terminal status`.
type TerminalStatusCmd struct {
	Agent   string `arg:"" optional:""`
	Session string `arg:"" optional:""`
}

func (c *TerminalStatusCmd) Run(env *Env) error { return Exit(ExitUsage, errNotYet) }
