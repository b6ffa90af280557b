package terminal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/procstat"
	"github.com/cortexfs/ctx/internal/safefs"
	"github.com/cortexfs/ctx/internal/sandbox"
	"github.com/cortexfs/ctx/internal/termres"
	"github.com/cortexfs/ctx/internal/workspace"
)

// Program is what the terminal runs inside its sandbox (T1).
const Program = layout.SandboxRoot + "/bin/tsh"

// HistoryTail bounds how much of the resource's events.jsonl the daemon
// reads: the last HistoryTail bytes (issue 16 item 17). The file grows with
// every attach, detach and resize and is never read whole.
const HistoryTail = 1 << 20

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

// Spec is the bwrap view of a terminal's shell: the agent's view
// (sandbox.View: /ctx with only the allowed tools, /home/agent, the
// session) with workspace bound writable at /workspace (.git read-only),
// tsh started there. Neither the socket nor events.jsonl is in the view:
// ctxterm serves and records them from the host (issue 11 item 5, issue 16
// item 17). The shell keeps its session and controlling terminal (no
// --new-session: tsh moves what it runs to a new session) and runs as PID 1
// of the sandbox (kill(-1) from inside never reaches it), and bwrap dies
// with ctxterm, its parent. spec: B1 B2 T1
// The view's placeholders (absent protected names) are held until the
// caller calls Ended on the returned Held, once the terminal has ended.
func Spec(l layout.Layout, def *agentdef.Def, session, id, workspace string, placeholders *workspace.Registry) (bwrap.Spec, *sandbox.Held, error) {
	v := sandbox.View{Layout: l, Def: def, Session: session, Scope: layout.ScopePrivate, Run: id, Tsh: true,
		Tools: sandbox.AllowedTools, Workspace: workspace, Cwd: layout.SandboxWorkspace, Placeholders: placeholders}
	s, held, err := v.SpecHeld([]string{Program}, Env(v))
	if err != nil {
		return bwrap.Spec{}, nil, err
	}
	s.Chdir = layout.SandboxWorkspace // spec: B1, D6
	s.SharedSession = true            // issue 11 item 5: the shell needs its controlling terminal
	s.AsPID1 = true                   // issue 11 item 5: kill(-1)/kill(0) from a tool miss the shell
	return s, held, nil
}

// Hold is how a started terminal waits, before anything of its sandbox
// runs, until the daemon has registered its launch root (U2): ctxterm
// reads one byte from descriptor FD (the built-in launcher's pipe) or from
// the FIFO at path FIFO (the systemd launcher, which cannot hand a unit a
// descriptor). An EOF, a timeout or an error ends ctxterm before it starts
// anything (fails closed).
type Hold struct {
	FD   int
	FIFO string
}

// Command is a terminal's argv: ctxterm on the host — it holds the PTY
// master, serves the socket and writes the resource's events.jsonl — running
// bwrap (bwrapPath with s), which runs tsh. Only the shell and what it runs
// are inside the sandbox. spec: T1 T2 T5; issue 11 item 5
func Command(l layout.Layout, agent, session, bwrapPath string, s bwrap.Spec, h Hold) ([]string, error) {
	if h.FD > 0 && h.FIFO != "" {
		return nil, errors.New("terminal: a hold descriptor and a hold FIFO")
	}
	args, err := s.Args()
	if err != nil {
		return nil, err
	}
	argv := []string{filepath.Join(l.BinDir(), "ctxterm"),
		"--listen", l.RuntimeTerminalSocket(agent, session),
		"--events", filepath.Join(l.TerminalDir(agent, session), termres.EventsFile),
		"--sandboxed"}
	switch {
	case h.FD > 0:
		argv = append(argv, "--hold-fd", strconv.Itoa(h.FD))
	case h.FIFO != "":
		argv = append(argv, "--hold", h.FIFO)
	}
	argv = append(argv, "--", bwrapPath)
	return append(argv, args...), nil
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

// readHistory reads the last HistoryTail bytes of events.jsonl (a first
// line cut by the tail is skipped). Generations started before the tail
// are also known from the cleanup receipt (see launch).
func readHistory(dir string) history {
	var h history
	b, _ := readTail(filepath.Join(dir, termres.EventsFile), HistoryTail)
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), HistoryTail)
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

// readTail returns at most limit bytes from the end of the file at path,
// starting after a line break when the file is longer (never a cut line).
// The final component is not followed; only a regular file is read.
func readTail(path string, limit int64) ([]byte, error) {
	f, st, err := safefs.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	off := max(st.Size()-limit, 0)
	b, err := io.ReadAll(io.NewSectionReader(f, off, limit))
	if err != nil {
		return nil, err
	}
	if off > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return nil, nil
		}
		b = b[i+1:]
	}
	return b, nil
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
