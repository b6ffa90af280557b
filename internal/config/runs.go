package config

import "sync"

// RunCount counts the runs whose done is not yet committed. The session
// actor adds one when a run becomes active and removes it when the run's
// done is committed; a shutdown that cancelled every run waits on Idle
// for them to conclude (interfaces.md "Daemon": active runs cancelled,
// logs flushed) — a notification, not a poll. The zero value counts none.
type RunCount struct {
	mu   sync.Mutex
	n    int64
	idle chan struct{} // made while n > 0, closed when it is back to 0
}

// Add adds delta (±1) to the count and returns the new count.
func (r *RunCount) Add(delta int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n += delta
	if r.n <= 0 && r.idle != nil {
		close(r.idle)
		r.idle = nil
	}
	return r.n
}

// Load returns the count.
func (r *RunCount) Load() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// Idle returns a channel closed once no run is counted (already closed
// when none is now).
func (r *RunCount) Idle() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n <= 0 {
		return closed
	}
	if r.idle == nil {
		r.idle = make(chan struct{})
	}
	return r.idle
}
