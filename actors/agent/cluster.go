package agent

import (
	"context"
	"os"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/cortexfs/ctx/actors/session"
	"github.com/cortexfs/ctx/ipc"
)

// A cluster node serves a session only under an ownership etcd gave it
// (docs/cluster.md): the first request for a session that has no actor
// here asks the node (config.Cluster.Own, off the actor: etcd may stall);
// the requests that arrive meanwhile wait behind it, in order.

// ownTimeout bounds one ownership answer.
const ownTimeout = 10 * time.Second

// fromHere says whether a connection's peer is this very process: the
// node's own front door or failover handing a request to this node's
// socket (docs/cluster.md "The front door").
func fromHere(conn *ipc.Conn) bool { return int(conn.Cred.Pid) == os.Getpid() }

// owned is the node's answer for one session.
type owned struct {
	key         session.Key
	epoch       int64
	node, owner string
	err         error
}

func (a *Actor) resolve(c actor.Context, key session.Key, m *incoming) {
	if a.resolving == nil {
		a.resolving = map[session.Key][]*incoming{}
	}
	waiting, asked := a.resolving[key]
	a.resolving[key] = append(waiting, m)
	if asked {
		return
	}
	self, root, ctx, cl, here := c.Self(), c.ActorSystem().Root, a.ctx, a.cfg.Cluster, fromHere(m.conn)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		octx, cancel := context.WithTimeout(ctx, ownTimeout)
		defer cancel()
		epoch, node, owner, err := cl.Own(octx, key.Agent, key.Scope, key.Name, here)
		root.Send(self, &owned{key: key, epoch: epoch, node: node, owner: owner, err: err})
	}()
}

func (a *Actor) onOwned(c actor.Context, m *owned) {
	waiting := a.resolving[m.key]
	delete(a.resolving, m.key)
	var refuse error
	switch {
	case m.err != nil:
		a.log.Error("session ownership", "session", m.key.Name, "scope", m.key.Scope, "err", m.err)
		refuse = ipc.Errorf(ipc.CodeInternal, "the cluster could not settle who serves session %s: %v", m.key.Name, m.err)
	case m.epoch == 0:
		// Another node serves it: the front door carries each request
		// there — unless it was handed here by a node already (the
		// owner moved meanwhile): that node asks again.
		for _, w := range waiting {
			if fromHere(w.conn) {
				f := ipc.ErrorFrame("", ipc.Errorf(ipc.CodeNotOwner, "session %s is served by node %s", m.key.Name, m.owner))
				f.Session = m.key.Name
				w.conn.SendFrame(f)
			} else if a.conns[w.conn] {
				a.forward(m.owner, w)
			}
		}
		return
	}
	if refuse != nil {
		for _, w := range waiting {
			f := ipc.ErrorFrame("", refuse)
			f.Session = m.key.Name
			w.conn.SendFrame(f)
		}
		return
	}
	if _, live := a.sessions[m.key]; !live {
		keep := a.keeps[m.key]
		if keep == nil {
			keep = session.NewKeep()
			a.keeps[m.key] = keep
		}
		keep.Epoch, keep.Node, keep.Fence = m.epoch, m.node, a.cfg.Cluster.Owning
	}
	for _, w := range waiting {
		if !a.conns[w.conn] {
			continue // its client left while the node was asked
		}
		pid := a.sessionPID(c, m.key)
		c.Send(pid, &session.Request{Conn: w.conn, Req: w.req})
		a.routed[pid.Id]++
	}
}

// forward hands one request to the front door, off the actor: it lasts
// as long as its request (a run's frames included), and ends with the
// agent's context.
func (a *Actor) forward(owner string, w *incoming) {
	cl, ctx := a.cfg.Cluster, a.ctx
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		cl.Forward(ctx, owner, a.name, w.req, w.conn)
	}()
}

// release gives up this node's ownership of a passivated session once its
// log is closed (the writer ends before the keep's owner lock is free),
// so the next owner never seals a segment still being written here.
func (a *Actor) release(key session.Key, keep *session.Keep) {
	cl, ctx, log := a.cfg.Cluster, a.ctx, a.log
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		keep.WaitClosed()
		rctx, cancel := context.WithTimeout(ctx, ownTimeout)
		defer cancel()
		cl.Release(rctx, key.Agent, key.Scope, key.Name, keep.Epoch)
		log.Debug("session ownership released", "session", key.Name, "epoch", keep.Epoch)
	}()
}
