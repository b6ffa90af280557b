package tsh

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/toolctx"
	"github.com/cortexfs/ctx/internal/toolpath"
	"github.com/cortexfs/ctx/internal/tshrc"
)

// ErrConfig is wrapped by configuration errors (an invalid .tshrc, a bad
// CTX_AGENT_SUBJECT); tsh exits 2 on them.
var ErrConfig = errors.New("tsh configuration")

// Subject is CTX_AGENT_SUBJECT: <uid>:<agent>:<session>.
type Subject struct {
	UID     int
	Agent   string
	Session string
}

// ParseSubject parses CTX_AGENT_SUBJECT.
func ParseSubject(s string) (Subject, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return Subject{}, fmt.Errorf("CTX_AGENT_SUBJECT %q: want <uid>:<agent>:<session>: %w", s, ErrConfig)
	}
	uid, err := strconv.Atoi(parts[0])
	if err != nil || uid < 0 || strconv.Itoa(uid) != parts[0] {
		return Subject{}, fmt.Errorf("CTX_AGENT_SUBJECT %q: bad uid: %w", s, ErrConfig)
	}
	if err := layout.CheckName("agent", parts[1]); err != nil {
		return Subject{}, fmt.Errorf("CTX_AGENT_SUBJECT: %w (%w)", err, ErrConfig)
	}
	if err := layout.CheckName("session", parts[2]); err != nil {
		return Subject{}, fmt.Errorf("CTX_AGENT_SUBJECT: %w (%w)", err, ErrConfig)
	}
	return Subject{UID: uid, Agent: parts[1], Session: parts[2]}, nil
}

// Env is what tsh reads from its environment. Build it with EnvFrom.
type Env struct {
	Getenv func(string) string
}

// InAgentView reports whether tsh runs inside an agent view (CTX_AGENT set).
func (e Env) InAgentView() bool { return e.Getenv("CTX_AGENT") != "" }

// root is CTX_ROOT: the environment's, else /ctx inside an agent view, else
// the host default (layout.DefaultRoot).
func (e Env) root() string {
	if r := e.Getenv("CTX_ROOT"); r != "" && filepath.IsAbs(r) {
		return filepath.Clean(r)
	}
	if e.InAgentView() {
		return layout.SandboxRoot
	}
	return layout.DefaultRoot()
}

// home is CTX_HOME for a standalone session: the environment's, else
// CTX_ROOT/home/<uid>.
func (e Env) home(uid int) string {
	if h := e.Getenv("CTX_HOME"); h != "" && filepath.IsAbs(h) {
		return filepath.Clean(h)
	}
	return layout.Layout{Root: e.root(), UID: uid}.UserHome()
}

// SearchPath returns the tool directories in order. Inside an agent view only
// the runtime-provided CTX_PATH counts (spec: K4); standalone, the
// directories of CTX_HOME/.tshrc come first, then the inherited CTX_PATH
// (spec: K3). The host PATH is never read (spec: D5). An invalid .tshrc is an
// error wrapping ErrConfig: tsh never falls back to another path.
func (e Env) SearchPath(uid int) ([]string, error) {
	inherited := toolpath.SplitPath(e.Getenv("CTX_PATH"))
	if e.InAgentView() {
		return inherited, nil
	}
	rc := filepath.Join(e.home(uid), ".tshrc")
	dirs, _, err := tshrc.Load(rc)
	if err != nil {
		return nil, fmt.Errorf("%w (%w)", err, ErrConfig)
	}
	return append(dirs, inherited...), nil
}

// StatePath is the tools.json of this session: inside an agent view the
// private session directory named by CTX_AGENT_SUBJECT
// (CTX_ROOT/home/<uid>/agent/<agent>/session/<session>/tools.json), else
// CTX_HOME/tsh/tools.json.
func (e Env) StatePath(uid int) (string, error) {
	if !e.InAgentView() {
		return filepath.Join(e.home(uid), "tsh", toolctx.StateFileName), nil
	}
	sub, err := ParseSubject(e.Getenv("CTX_AGENT_SUBJECT"))
	if err != nil {
		return "", err
	}
	if a := e.Getenv("CTX_AGENT"); a != sub.Agent {
		return "", fmt.Errorf("CTX_AGENT %q does not match CTX_AGENT_SUBJECT agent %q: %w", a, sub.Agent, ErrConfig)
	}
	l := layout.Layout{Root: e.root(), UID: sub.UID}
	return filepath.Join(l.SessionDir(sub.Agent, layout.ScopePrivate, sub.Session), toolctx.StateFileName), nil
}

// agentControl is CTX_ROOT/agent/<agent>.d inside an agent view, "" outside.
func (e Env) agentControl() string {
	a := e.Getenv("CTX_AGENT")
	if a == "" || layout.CheckName("agent", a) != nil {
		return ""
	}
	return layout.Layout{Root: e.root()}.AgentControl(a)
}
