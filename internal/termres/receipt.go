package termres

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/internal/layout"
)

// Receipt kinds.
const (
	KindLaunch  = "launch"
	KindCleanup = "cleanup"
)

// Receipt is a launch receipt (runtime.md L2) or, with the stop fields
// set, a cleanup receipt (L3). It is the only record of which process
// generation may be stopped (L5: there is no instances/ directory).
type Receipt struct {
	Kind       string `json:"kind"`
	Role       string `json:"role"` // "terminal"
	Launcher   string `json:"launcher"`
	Unit       string `json:"unit,omitempty"`
	Invocation string `json:"invocation,omitempty"`
	PID        int    `json:"pid"`
	StartTime  uint64 `json:"start_time"` // /proc/<pid>/stat field 22
	BootID     string `json:"boot_id"`
	UID        int    `json:"uid"`
	Socket     string `json:"socket"`     // the real socket (T3 runtime path)
	ABISocket  string `json:"abi_socket"` // the session path (T3 ABI path)
	Agent      string `json:"agent"`
	Session    string `json:"session"`
	Generation int    `json:"generation"`
	Terminal   string `json:"terminal"` // resource id (T5)
	Workspace  string `json:"workspace,omitempty"`
	Started    string `json:"started"`
	// Cleanup only.
	Stopped string `json:"stopped,omitempty"`
	Reason  string `json:"reason,omitempty"` // stop | exited | gone
	Status  *int   `json:"status,omitempty"`
}

// ReceiptDir is $CTX_RUNTIME_DIR/receipts/terminal/<agent>/<session>.
func ReceiptDir(l layout.Layout, agent, session string) string {
	return filepath.Join(l.ReceiptDir(), "terminal", agent, session)
}

// LaunchReceiptPath is the launch receipt of the live generation.
func LaunchReceiptPath(l layout.Layout, agent, session string) string {
	return filepath.Join(ReceiptDir(l, agent, session), "launch.json")
}

// CleanupReceiptPath is the cleanup receipt of the last ended generation.
func CleanupReceiptPath(l layout.Layout, agent, session string) string {
	return filepath.Join(ReceiptDir(l, agent, session), "cleanup.json")
}

// WriteReceipt writes r atomically at path (0600; directories 0700).
func WriteReceipt(path string, r Receipt) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("receipt: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("receipt: %w", err)
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o600)
}

// ReadReceipt reads a receipt; a missing one wraps os.ErrNotExist.
func ReadReceipt(path string) (Receipt, error) {
	var r Receipt
	b, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("receipt: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("receipt %s: %w", path, err)
	}
	return r, nil
}

// LaunchReceipts lists the (agent, session) pairs that have a launch
// receipt: the terminals a starting daemon must adopt or clean up.
func LaunchReceipts(l layout.Layout) [][2]string {
	var out [][2]string
	base := filepath.Join(l.ReceiptDir(), "terminal")
	agents, _ := os.ReadDir(base)
	for _, a := range agents {
		if layout.CheckName("agent", a.Name()) != nil {
			continue
		}
		sessions, _ := os.ReadDir(filepath.Join(base, a.Name()))
		for _, s := range sessions {
			if layout.CheckName("session", s.Name()) != nil {
				continue
			}
			if _, err := os.Stat(LaunchReceiptPath(l, a.Name(), s.Name())); err == nil {
				out = append(out, [2]string{a.Name(), s.Name()})
			}
		}
	}
	return out
}
