package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/cortexfs/ctx/internal/agentdef"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/ownership"
	"github.com/cortexfs/ctx/ipc"
)

// Failover concludes the runs a lost node left open without waiting for
// a client to ask (interfaces.md "Cluster (phase 1)": "whether or not a
// client is attached"). When an owner key vanishes — a lease expired —
// or when the node starts, every session whose log shows a run without
// done and that has no owner is adopted by the one live node Pick
// chooses: it asks its own agent socket to resume the session, which
// takes the ownership and opens the log, concluding the run exactly as
// a client's request would (one code path; the etcd transaction makes
// it once).

// adoptTimeout bounds one adoption's resume.
const adoptTimeout = 15 * time.Second

// failover runs until ctx ends.
func (n *node) failover(ctx context.Context, live *ownership.LiveSet, l layout.Layout, log *slog.Logger) {
	// The channel is taken before the snapshot it follows, so no change
	// falls between the two.
	changed := n.owners.Changed()
	prev := owned(n.owners.Cached())
	n.scanRoot(ctx, live, l, prev, log)
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
		changed = n.owners.Changed()
		cur := owned(n.owners.Cached())
		for id, was := range prev {
			if _, ok := cur[id]; !ok {
				// The lost owner may still be in the live view (its node
				// key expires with the same lease): it is not a candidate.
				n.adopt(ctx, live, l, id, was.Node, log)
			}
		}
		prev = cur
	}
}

func owned(owners []ownership.Owner) map[string]ownership.Owner {
	m := make(map[string]ownership.Owner, len(owners))
	for _, o := range owners {
		m[o.Session] = o
	}
	return m
}

// scanRoot adopts, at the node's start, the sessions with an open run and
// no owner: their node was lost while no other node watched.
func (n *node) scanRoot(ctx context.Context, live *ownership.LiveSet, l layout.Layout, has map[string]ownership.Owner, log *slog.Logger) {
	agents, err := agentdef.List(l)
	if err != nil {
		log.Warn("failover scan: list agents", "err", err)
		return
	}
	for _, a := range agents {
		for _, scope := range []string{layout.ScopePrivate, layout.ScopeShared} {
			ents, _ := os.ReadDir(l.SessionsDir(a, scope))
			for _, e := range ents {
				id := ownership.SessionID(a, scope, e.Name())
				if _, owned := has[id]; e.IsDir() && !owned && layout.CheckName("session", e.Name()) == nil {
					n.adopt(ctx, live, l, id, "", log)
				}
			}
		}
	}
}

// adopt resumes session id through this node's own agent socket when this
// node is the one Pick chooses among the live nodes but lost and its log
// shows a run without done.
func (n *node) adopt(ctx context.Context, live *ownership.LiveSet, l layout.Layout, id, lost string, log *slog.Logger) {
	parts := strings.SplitN(id, "/", 3)
	if len(parts) != 3 {
		return
	}
	agent, scope, session := parts[0], parts[1], parts[2]
	if activeRun(l.SessionDir(agent, scope, session)) == nil {
		return // passivated or finished: nothing to conclude
	}
	var nodes []ownership.NodeInfo
	for _, x := range live.Nodes() {
		if x.Node != lost {
			nodes = append(nodes, x)
		}
	}
	if len(nodes) == 0 || ownership.Pick(id, nodes).Node != n.cfg.Node {
		return
	}
	if err := resumeOwn(ctx, l, agent, scope, session); err != nil {
		log.Warn("failover: adopting a lost node's session", "session", id, "err", err)
		return
	}
	log.Info("failover: adopted a lost node's session", "session", id)
}

// resumeOwn sends one resume to this node's agent socket and reads to its
// caught_up (or its error).
func resumeOwn(ctx context.Context, l layout.Layout, agent, scope, session string) error {
	ctx, cancel := context.WithTimeout(ctx, adoptTimeout)
	defer cancel()
	c, err := dialAgent(ctx, l, agent, adoptTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	req, _ := json.Marshal(ipc.Request{Op: ipc.OpResume, Scope: scope, Session: session})
	if _, err := c.Write(append(req, '\n')); err != nil {
		return err
	}
	br := bufio.NewReaderSize(c, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			for err == bufio.ErrBufferFull { // a long frame: not the one we wait for
				_, err = br.ReadSlice('\n')
			}
			continue
		}
		if err != nil {
			return err
		}
		var f struct{ Type, Code, Message string }
		if json.Unmarshal(line, &f) != nil {
			continue
		}
		switch f.Type {
		case ipc.TypeCaughtUp:
			return nil
		case ipc.TypeError:
			if !strings.Contains(string(line), `"seq"`) { // a stored error frame is history, not an answer
				return fmt.Errorf("%s: %s", f.Code, f.Message)
			}
		}
	}
}
