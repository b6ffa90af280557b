package cgroup

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/cortexfs/ctx/internal/limits"
)

// A session's runs follow one another (one active run per session): where
// the backend makes groups itself (v1, v2), a run's group is kept, emptied,
// when the run ends, and the session's next run takes it instead of
// making one — no mkdir, no limits written, no rmdir and no kernel
// teardown of a memory cgroup for each run. The run's own walls are the
// same: Close still waits its grace, kills whatever is left inside and
// only then gives the group back, empty; a group that cannot be emptied,
// or whose limits differ from the next run's, is removed instead. A group
// is kept at most keepFor after its run, at most keepMax at once (the
// oldest idle one goes first); Release removes them all.
const (
	keepFor = 10 * time.Second
	keepMax = 64
)

// slot is a session's kept group.
type slot struct {
	key   string
	name  string
	lim   limits.Limits
	busy  bool // leased by a run, or being emptied by its Close
	idle  time.Time
	timer *time.Timer
}

// Lease returns the group for run, a run of session (any string naming
// it uniquely: agent, scope, name): the session's kept group when one is
// idle with the same limits, else a new one the session keeps after the
// run (where the backend can keep groups), else the run's own (Group).
func (m *Manager) Lease(session, run string, l limits.Limits) *Group {
	if m == nil {
		return nil
	}
	// A creator's groups can be left behind empty (v1, v2); a systemd
	// scope ends with its last process.
	if _, ok := m.b.(creator); !ok || session == "" {
		return m.Group(run, l)
	}
	m.slotMu.Lock()
	defer m.slotMu.Unlock()
	if m.released {
		return m.Group(run, l)
	}
	if m.slots == nil {
		m.slots = map[string]*slot{}
	}
	s := m.slots[session]
	switch {
	case s != nil && s.busy:
		// The previous run's Close is still emptying it (a process in
		// its grace): this run gets a group of its own, kept by no one.
		return m.Group(run, l)
	case s != nil && s.lim == l:
		s.busy = true
		m.idle--
		s.timer.Stop()
		// Made and emptied by the session's previous run: only joined.
		return &Group{m: m, name: s.name, lim: l, slot: s, used: true, ready: true}
	case s != nil:
		m.dropLocked(s) // other limits: removed, and a new one made
	}
	m.slotGen++
	h := sha256.Sum256([]byte(session))
	s = &slot{key: session, name: "run-s" + hex.EncodeToString(h[:8]) + "-" + strconv.Itoa(m.slotGen), lim: l, busy: true}
	m.slots[session] = s
	return &Group{m: m, name: s.name, lim: l, slot: s}
}

// giveBack ends a lease whose group Close emptied: the session keeps it
// for keepFor (at most keepMax groups are idle at once).
func (m *Manager) giveBack(s *slot) {
	m.slotMu.Lock()
	if m.slots[s.key] != s || m.released {
		m.slotMu.Unlock()
		m.removeSlot(s) // replaced meanwhile, or the manager is done
		return
	}
	defer m.slotMu.Unlock()
	s.busy, s.idle = false, time.Now()
	s.timer = time.AfterFunc(m.keepFor, func() { m.expire(s) })
	if m.idle++; m.idle <= m.keepMax {
		return
	}
	var oldest *slot
	for _, o := range m.slots {
		if !o.busy && (oldest == nil || o.idle.Before(oldest.idle)) {
			oldest = o
		}
	}
	m.dropLocked(oldest)
}

// forget ends a lease whose group could not be emptied: it is not kept.
func (m *Manager) forget(s *slot) {
	m.slotMu.Lock()
	defer m.slotMu.Unlock()
	if m.slots[s.key] == s {
		delete(m.slots, s.key)
	}
}

// expire removes a group kept idle for keepFor.
func (m *Manager) expire(s *slot) {
	m.slotMu.Lock()
	defer m.slotMu.Unlock()
	if m.slots[s.key] == s && !s.busy && time.Since(s.idle) >= m.keepFor-time.Millisecond {
		m.dropLocked(s)
	}
}

// dropLocked forgets an idle slot and removes its group off the caller
// (m.slotMu held; only idle slots come here).
func (m *Manager) dropLocked(s *slot) {
	if m.slots[s.key] == s {
		delete(m.slots, s.key)
		m.idle--
	}
	if s.timer != nil {
		s.timer.Stop()
	}
	m.cleaning.Add(1)
	go func() { // owned by the manager: Release waits for it
		defer m.cleaning.Done()
		m.removeSlot(s)
	}()
}

// removeSlot kills what may be in s's group (nothing: it was emptied) and
// removes it.
func (m *Manager) removeSlot(s *slot) {
	err := m.b.kill(s.name)
	if err == nil {
		err = m.b.remove(s.name)
	}
	if err != nil {
		m.log.Warn("kept run cgroup not removed (the next daemon start sweeps it)", "group", s.name, "err", err)
	}
}

// releaseSlots removes every kept group and keeps no more (Release).
func (m *Manager) releaseSlots() {
	m.slotMu.Lock()
	m.released = true
	for _, s := range m.slots {
		if !s.busy {
			m.dropLocked(s)
		}
	}
	m.slotMu.Unlock()
	m.cleaning.Wait()
}
