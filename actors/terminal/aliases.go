package terminal

import (
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/termres"
)

// The terminal resource as files (receipts, status, history) lives in
// internal/termres so that the ctx client reads it without linking the
// actor runtime; these names keep the actor's code and
// its callers unchanged.

// Receipt is termres.Receipt.
type Receipt = termres.Receipt

// Status is termres.Status.
type Status = termres.Status

type daemonEvent = termres.DaemonEvent

// Receipt kinds, states and event types: see termres.
const (
	KindLaunch        = termres.KindLaunch
	KindCleanup       = termres.KindCleanup
	StateLive         = termres.StateLive
	StateExited       = termres.StateExited
	StateNeverStarted = termres.StateNeverStarted
	EventAgentStart   = termres.EventAgentStart
	EventAgentStop    = termres.EventAgentStop
	HistoryTail       = termres.HistoryTail
)

// ABISocket is termres.ABISocket.
func ABISocket(l layout.Layout, agent, session string) string {
	return termres.ABISocket(l, agent, session)
}

// ReceiptDir is termres.ReceiptDir.
func ReceiptDir(l layout.Layout, agent, session string) string {
	return termres.ReceiptDir(l, agent, session)
}

// LaunchReceiptPath is termres.LaunchReceiptPath.
func LaunchReceiptPath(l layout.Layout, agent, session string) string {
	return termres.LaunchReceiptPath(l, agent, session)
}

// CleanupReceiptPath is termres.CleanupReceiptPath.
func CleanupReceiptPath(l layout.Layout, agent, session string) string {
	return termres.CleanupReceiptPath(l, agent, session)
}

// WriteReceipt is termres.WriteReceipt.
func WriteReceipt(path string, r Receipt) error { return termres.WriteReceipt(path, r) }

// ReadReceipt is termres.ReadReceipt.
func ReadReceipt(path string) (Receipt, error) { return termres.ReadReceipt(path) }

// LaunchReceipts is termres.LaunchReceipts.
func LaunchReceipts(l layout.Layout) [][2]string { return termres.LaunchReceipts(l) }

// Describe is termres.Describe.
func Describe(l layout.Layout, agent, session string) (Status, error) {
	return termres.Describe(l, agent, session)
}

// Alive is termres.Alive.
func Alive(r Receipt) bool { return termres.Alive(r) }

// List is termres.List.
func List(l layout.Layout, agent string) [][2]string { return termres.List(l, agent) }

func appendEvent(dir string, ev daemonEvent) error { return termres.AppendEvent(dir, ev) }

func readHistory(dir string) termres.History { return termres.ReadHistory(dir) }
