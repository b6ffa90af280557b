package session

import "github.com/cortexfs/ctx/ipc"

// sub is one client following a run; replay marks what it is sent as
// replayed (P4: it asked again with a request id already used).
type sub struct {
	conn   *ipc.Conn
	replay bool
}

// followers are the clients following each run, by run id. It lives in
// Keep, so it outlives a crash of the session actor; only the actor (any
// incarnation) touches it.
type followers map[string][]sub

// add makes the clients follow run.
func (f followers) add(run string, s ...sub) { f[run] = append(f[run], s...) }

// drop forgets run's followers (its done was sent, or the log is gone).
func (f followers) drop(run string) { delete(f, run) }

// dropAll forgets every follower.
func (f followers) dropAll() { clear(f) }

// dropConn forgets conn wherever it follows (its connection closed).
func (f followers) dropConn(conn *ipc.Conn) {
	for run, subs := range f {
		f[run] = without(subs, conn)
	}
}

// live makes conn's frames of run unmarked from now on: it has taken the
// requester's place (see active.approver).
func (f followers) live(run string, conn *ipc.Conn) {
	for i := range f[run] {
		if f[run][i].conn == conn {
			f[run][i].replay = false
		}
	}
}

// any reports whether some client follows some run.
func (f followers) any() bool {
	for _, subs := range f {
		if len(subs) > 0 {
			return true
		}
	}
	return false
}

// runs lists the runs that have followers.
func (f followers) runs() []string {
	out := make([]string, 0, len(f))
	for run := range f {
		out = append(out, run)
	}
	return out
}

// send hands one committed line of run to each of its followers.
func (f followers) send(run string, line []byte) {
	for _, s := range f[run] {
		if s.replay {
			s.conn.Send(ipc.MarkReplay(line))
		} else {
			s.conn.Send(line)
		}
	}
}

// sendBatch hands stored lines of run to each of its followers, as one unit.
func (f followers) sendBatch(run string, lines [][]byte) {
	for _, s := range f[run] {
		s.conn.SendBatch(lines, s.replay)
	}
}

// each calls fn for every follower of every run.
func (f followers) each(fn func(sub)) {
	for _, subs := range f {
		for _, s := range subs {
			fn(s)
		}
	}
}

// without is subs less conn's entries, filtered in place.
func without(subs []sub, conn *ipc.Conn) []sub {
	kept := subs[:0]
	for _, s := range subs {
		if s.conn != conn {
			kept = append(kept, s)
		}
	}
	return kept
}
