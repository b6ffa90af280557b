package termres

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/procstat"
	"github.com/cortexfs/ctx/internal/safefs"
)

// HistoryTail bounds how much of the resource's events.jsonl the daemon
// reads: the last HistoryTail bytes. The file grows with
// every attach, detach and resize and is never read whole.
const HistoryTail = 1 << 20

// Event types the daemon adds to the resource's events.jsonl (besides
// Created); ctxterm writes the attach/detach/resize/exit ones.
const (
	EventAgentStart = "agent.start"
	EventAgentStop  = "agent.stop"
)

// ABISocket is the T3 ABI path: session/<s>/terminal/main.sock, a symlink
// to the runtime socket (L6: an alias of a live endpoint).
func ABISocket(l layout.Layout, agent, session string) string {
	return filepath.Join(l.TerminalDir(agent, session), SocketFile)
}

// DaemonEvent is a line the daemon appends to the resource's events.jsonl;
// Read reads it as an Event (the extra fields are ignored there).
type DaemonEvent struct {
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

func AppendEvent(dir string, ev DaemonEvent) error {
	if ev.TS.IsZero() {
		ev.TS = time.Now().UTC()
	}
	line, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, EventsFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("terminal events: %w", err)
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("terminal events: %w", err)
	}
	return f.Sync()
}

// History is what events.jsonl says about the generations.
type History struct {
	LastGeneration int
	ExitedSince    bool // an "exited" line after the last agent.start
	Clients        int  // attached minus detached since the last agent.start
	LastStatus     *int
}

// ReadHistory reads the last HistoryTail bytes of events.jsonl (a first
// line cut by the tail is skipped). Generations started before the tail
// are also known from the cleanup receipt (see launch).
func ReadHistory(dir string) History {
	var h History
	b, _ := readTail(filepath.Join(dir, EventsFile), HistoryTail)
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), HistoryTail)
	for sc.Scan() {
		var ev DaemonEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		switch ev.Type {
		case EventAgentStart:
			h.LastGeneration = max(h.LastGeneration, ev.Generation)
			h.ExitedSince, h.Clients = false, 0
		case Exited:
			h.ExitedSince = true
			h.LastStatus = ev.Status
		case Attached:
			h.Clients++
		case Detached:
			h.Clients = max(0, h.Clients-1)
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
	Clients    int    `json:"Clients"`
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
	id, err := ID(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return st, fmt.Errorf("terminal %s/%s: %w", agent, session, os.ErrNotExist)
		}
		return st, err
	}
	st.ID = id
	h := ReadHistory(dir)
	st.Generation, st.LastStatus = h.LastGeneration, h.LastStatus
	if h.LastGeneration > 0 {
		st.State = StateExited
	}
	if r, err := ReadReceipt(LaunchReceiptPath(l, agent, session)); err == nil && Alive(r) {
		st.State, st.Launcher, st.Unit, st.PID = StateLive, r.Launcher, r.Unit, r.PID
		st.Generation, st.Socket, st.ABISocket, st.Clients = r.Generation, r.Socket, r.ABISocket, h.Clients
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
			if _, err := ID(l.TerminalDir(a, e.Name())); err == nil {
				out = append(out, [2]string{a, e.Name()})
			}
		}
	}
	return out
}
