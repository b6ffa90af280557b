package terminal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/procstat"
	"github.com/cortexfs/ctx/internal/sandbox"
	"github.com/cortexfs/ctx/internal/termres"
)

// Paths inside the terminal's sandbox.
const (
	// SandboxSocketDir is where $CTX_RUNTIME_DIR/terminal/<agent>/<session>
	// is bound (read-write), so the socket ctxterm creates there is the real
	// socket on the host (T3).
	SandboxSocketDir = "/run/cortexfs/terminal"
	SandboxSocket    = SandboxSocketDir + "/main.sock"
	// SandboxEvents is the resource's events.jsonl, bound read-write for
	// ctxterm's --events (attached, detached, resized, exited).
	SandboxEvents = "/run/cortexfs/terminal.events.jsonl"
	// Program is what the terminal runs (T1).
	Program = layout.SandboxRoot + "/bin/tsh"
	// Server is the PTY server inside the sandbox (T2).
	Server = layout.SandboxRoot + "/bin/ctxterm"
)

// Event types the daemon adds to the resource's events.jsonl (besides
// termres.Created); ctxterm writes the attach/detach/resize/exit ones.
const (
	EventAgentStart = "agent.start"
	EventAgentStop  = "agent.stop"
)

// ABISocket is the T3 ABI path: session/<s>/terminal/main.sock, a symlink
// to the runtime socket (L6: an alias of a live endpoint).
func ABISocket(l layout.Layout, agent, session string) string {
	return filepath.Join(l.TerminalDir(agent, session), termres.SocketFile)
}

// Env is the terminal's whole environment: exactly the B3 allowlist. No
// CTX_RUN and no CTX_CONTROL_SOCKET: the launch root is registered with the
// resource id as its run (interfaces.md "Control socket"), so agent.update
// works from the terminal only when given --run explicitly. spec: B3 B4
func Env(v sandbox.View) map[string]string {
	env := v.BaseEnv() // CTX_ROOT CTX_HOME CTX_AGENT CTX_AGENT_SUBJECT CTX_PATH HOME
	env["USER"] = "agent"
	env["LOGNAME"] = "agent"
	env["SHELL"] = Program
	env["TERM"] = "xterm-256color"
	env["LANG"] = "C.UTF-8"
	return env
}

// Spec is the bwrap view of a terminal: the agent's view (sandbox.View:
// /ctx, /home/agent, the session) with workspace bound writable at
// /workspace (.git read-only), the terminal started there, plus the socket
// directory and the events file. outlive drops --die-with-parent (the
// built-in launcher: the terminal survives a daemon restart). spec: B1 B2 T1
func Spec(l layout.Layout, def *agentdef.Def, session, id, workspace string, outlive bool) bwrap.Spec {
	v := sandbox.View{Layout: l, Def: def, Session: session, Scope: layout.ScopePrivate, Run: id, Tsh: true,
		Workspace: workspace, Cwd: layout.SandboxWorkspace}
	argv := []string{Server, "--listen", SandboxSocket, "--events", SandboxEvents, "--seccomp", "--", Program}
	s := v.Spec(argv, Env(v))
	s.MountsAfter = append(s.MountsAfter,
		bwrap.Mount{Src: filepath.Dir(l.RuntimeTerminalSocket(def.Name, session)), Dst: SandboxSocketDir, Write: true},
		bwrap.Mount{Src: filepath.Join(l.TerminalDir(def.Name, session), termres.EventsFile), Dst: SandboxEvents, Write: true},
	)
	s.Chdir = layout.SandboxWorkspace // spec: B1, D6
	s.OutliveParent = outlive
	return s
}

// daemonEvent is a line the daemon appends to the resource's events.jsonl;
// termres.Read reads it as an Event (the extra fields are ignored there).
type daemonEvent struct {
	Type       string    `json:"type"`
	TS         time.Time `json:"ts"`
	ID         string    `json:"id,omitempty"`
	Launcher   string    `json:"launcher,omitempty"`
	Unit       string    `json:"unit,omitempty"`
	Invocation string    `json:"invocation,omitempty"`
	PID        int       `json:"pid,omitempty"`
	Generation int       `json:"generation,omitempty"`
	Workspace  string    `json:"workspace,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Status     *int      `json:"status,omitempty"`
}

func appendEvent(dir string, ev daemonEvent) error {
	if ev.TS.IsZero() {
		ev.TS = time.Now().UTC()
	}
	line, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, termres.EventsFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("terminal events: %w", err)
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("terminal events: %w", err)
	}
	return f.Sync()
}

// history is what events.jsonl says about the generations.
type history struct {
	lastGeneration int
	exitedSince    bool // an "exited" line after the last agent.start
	clients        int  // attached minus detached since the last agent.start
	lastStatus     *int
}

func readHistory(dir string) history {
	var h history
	b, _ := os.ReadFile(filepath.Join(dir, termres.EventsFile))
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var ev daemonEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		switch ev.Type {
		case EventAgentStart:
			h.lastGeneration = max(h.lastGeneration, ev.Generation)
			h.exitedSince, h.clients = false, 0
		case termres.Exited:
			h.exitedSince = true
			h.lastStatus = ev.Status
		case termres.Attached:
			h.clients++
		case termres.Detached:
			h.clients = max(0, h.clients-1)
		}
	}
	return h
}

// Status is what `ctx terminal status` shows of one resource.
type Status struct {
	Agent      string `json:"agent"`
	Session    string `json:"session"`
	ID         string `json:"id"`
	State      string `json:"state"` // live | exited | never-started
	Launcher   string `json:"launcher,omitempty"`
	Unit       string `json:"unit,omitempty"`
	PID        int    `json:"pid,omitempty"`
	Generation int    `json:"generation,omitempty"`
	Clients    int    `json:"clients"`
	Socket     string `json:"socket,omitempty"`
	ABISocket  string `json:"abi_socket,omitempty"`
	LastStatus *int   `json:"last_status,omitempty"`
}

// State values.
const (
	StateLive         = "live"
	StateExited       = "exited"
	StateNeverStarted = "never-started"
)

// Describe reads a terminal resource's status from its files alone: the
// id and events (CTX_ROOT), the launch receipt and /proc (live truth, L5).
func Describe(l layout.Layout, agent, session string) (Status, error) {
	dir := l.TerminalDir(agent, session)
	st := Status{Agent: agent, Session: session, State: StateNeverStarted}
	id, err := termres.ID(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return st, fmt.Errorf("terminal %s/%s: %w", agent, session, os.ErrNotExist)
		}
		return st, err
	}
	st.ID = id
	h := readHistory(dir)
	st.Generation, st.LastStatus = h.lastGeneration, h.lastStatus
	if h.lastGeneration > 0 {
		st.State = StateExited
	}
	if r, err := ReadReceipt(LaunchReceiptPath(l, agent, session)); err == nil && Alive(r) {
		st.State, st.Launcher, st.Unit, st.PID = StateLive, r.Launcher, r.Unit, r.PID
		st.Generation, st.Socket, st.ABISocket, st.Clients = r.Generation, r.Socket, r.ABISocket, h.clients
	} else if c, err := ReadReceipt(CleanupReceiptPath(l, agent, session)); err == nil {
		st.Launcher, st.Unit = c.Launcher, c.Unit
	}
	return st, nil
}

// Alive says whether r's pid still names the process it recorded (same
// boot, same start time).
func Alive(r Receipt) bool {
	if r.PID <= 0 {
		return false
	}
	if boot, err := procstat.BootID(); err != nil || boot != r.BootID {
		return false
	}
	s, err := procstat.Read(r.PID)
	return err == nil && s.StartTime == r.StartTime && s.State != 'Z' && s.State != 'X'
}

// List returns the (agent, session) pairs with a terminal resource,
// optionally only one agent's.
func List(l layout.Layout, agent string) [][2]string {
	var out [][2]string
	agents := []string{agent}
	if agent == "" {
		agents = nil
		ents, _ := os.ReadDir(filepath.Join(l.UserHome(), "agent"))
		for _, e := range ents {
			if e.IsDir() && layout.CheckName("agent", e.Name()) == nil {
				agents = append(agents, e.Name())
			}
		}
	}
	for _, a := range agents {
		ents, _ := os.ReadDir(l.SessionsDir(a, layout.ScopePrivate))
		for _, e := range ents {
			if _, err := termres.ID(l.TerminalDir(a, e.Name())); err == nil {
				out = append(out, [2]string{a, e.Name()})
			}
		}
	}
	return out
}
