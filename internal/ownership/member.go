package ownership

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultMargin is how long before the lease could expire in etcd the
// member stops counting itself owner: room for clock-rate differences
// and for a frame in flight (docs/cluster.md, "The owner's deadline").
const DefaultMargin = time.Second

// joinAttempts bounds the read-check-put loop of Join: each retry means
// another node joined between our read and our transaction.
const joinAttempts = 5

// Config is what JoinWith takes; Join fills it from its arguments.
type Config struct {
	Cluster string
	Me      NodeInfo
	// TTL is the lease's time to live (docs/cluster.md: 5 s). The
	// deadline counts with the smaller of TTL and what etcd granted.
	TTL time.Duration
	// Margin is subtracted from every deadline; zero means DefaultMargin.
	// It must be less than TTL/2, so that a deadline always leaves room
	// for at least one renewal (they are sent every TTL/3).
	Margin time.Duration
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Member is this node's membership: its lease, its nodes/<node> key and
// the deadline up to which it may act as owner. It renews the lease
// itself and never re-grants one: once Lost is closed the member is
// done, and the process is expected to stop (exit 75).
type Member struct {
	cli      *clientv3.Client
	keys     keys
	me       NodeInfo
	lease    clientv3.LeaseID
	ttl      time.Duration
	margin   time.Duration
	interval time.Duration
	log      *slog.Logger

	mu        sync.Mutex
	deadline  time.Time
	lostErr   error
	paused    bool // tests: renewals are not sent
	lost      chan struct{}
	deadlines chan time.Time

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// Join makes me a member of cluster with a lease of ttl and the default
// margin. See JoinWith.
func Join(ctx context.Context, cli *clientv3.Client, cluster string, me NodeInfo, ttl time.Duration) (*Member, error) {
	return JoinWith(ctx, cli, Config{Cluster: cluster, Me: me, TTL: ttl})
}

// JoinWith grants a lease, refuses to join when a live node runs another
// version (ErrVersionMismatch) or when cfg.Me.Node is already alive
// (ErrNodeAlive), and puts nodes/<node> on the lease. The check and the
// put are one transaction that fails when any node key changed since the
// check, so two nodes of different versions joining at once cannot both
// get in. On success the member's renewal goroutine runs until Leave or
// Close; on failure the lease is revoked.
func JoinWith(ctx context.Context, cli *clientv3.Client, cfg Config) (*Member, error) {
	k, err := keysFor(cfg.Cluster)
	if err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	if err := validName("node", cfg.Me.Node); err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	if cfg.Margin == 0 {
		cfg.Margin = DefaultMargin
	}
	if cfg.TTL < time.Second || cfg.Margin < 0 || cfg.Margin >= cfg.TTL/2 {
		return nil, fmt.Errorf("join %s: ttl %v, margin %v: want ttl >= 1s and 0 < margin < ttl/2", cfg.Cluster, cfg.TTL, cfg.Margin)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("cluster", cfg.Cluster, "node", cfg.Me.Node)
	value, err := json.Marshal(cfg.Me)
	if err != nil {
		return nil, fmt.Errorf("join %s: encode node: %w", cfg.Cluster, err)
	}

	// The grant is the first acknowledged renewal: the deadline counts
	// from the moment it was sent.
	sent := time.Now()
	g, err := cli.Grant(ctx, int64((cfg.TTL+time.Second-1)/time.Second))
	if err != nil {
		return nil, fmt.Errorf("join %s: grant lease: %w", cfg.Cluster, err)
	}
	ttl := min(cfg.TTL, time.Duration(g.TTL)*time.Second)
	if ttl <= 2*cfg.Margin {
		revoke(cli, g.ID, log)
		return nil, fmt.Errorf("join %s: etcd granted a %ds lease, not more than twice the margin %v", cfg.Cluster, g.TTL, cfg.Margin)
	}
	if err := putNode(ctx, cli, k, cfg.Me, value, g.ID); err != nil {
		revoke(cli, g.ID, log)
		return nil, fmt.Errorf("join %s as %s: %w", cfg.Cluster, cfg.Me.Node, err)
	}

	m := &Member{
		cli:       cli,
		keys:      k,
		me:        cfg.Me,
		lease:     g.ID,
		ttl:       ttl,
		margin:    cfg.Margin,
		interval:  ttl / 3,
		log:       log,
		deadline:  sent.Add(ttl - cfg.Margin),
		lost:      make(chan struct{}),
		deadlines: make(chan time.Time, 1),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	m.deadlines <- m.deadline
	log.Info("joined", "lease", fmt.Sprintf("%x", int64(g.ID)), "ttl", ttl, "deadline", m.deadline)
	go m.run()
	return m, nil
}

// putNode checks the live nodes' versions and puts nodes/<node>, retrying
// when another node key changed between the check and the put.
func putNode(ctx context.Context, cli *clientv3.Client, k keys, me NodeInfo, value []byte, lease clientv3.LeaseID) error {
	key := k.node(me.Node)
	for range joinAttempts {
		r, err := cli.Get(ctx, k.nodes(), clientv3.WithPrefix())
		if err != nil {
			return fmt.Errorf("read live nodes: %w", err)
		}
		for _, kv := range r.Kvs {
			var n NodeInfo
			if err := json.Unmarshal(kv.Value, &n); err != nil {
				return fmt.Errorf("live node %s: %w", kv.Key, err)
			}
			if string(kv.Key) == key {
				return fmt.Errorf("pid %d started %s, lease %x: %w", n.PID, n.Started.Format(time.RFC3339), kv.Lease, ErrNodeAlive)
			}
			if n.Version != me.Version {
				return fmt.Errorf("live node %s runs %q, this node %q: %w", n.Node, n.Version, me.Version, ErrVersionMismatch)
			}
		}
		t, err := cli.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
			// No node key was written since the read above (a deleted one
			// only shrinks the set checked).
			clientv3.Compare(clientv3.ModRevision(k.nodes()), "<", r.Header.Revision+1).WithPrefix(),
		).Then(
			clientv3.OpPut(key, string(value), clientv3.WithLease(lease)),
		).Commit()
		if err != nil {
			return fmt.Errorf("put %s: %w", key, err)
		}
		if t.Succeeded {
			return nil
		}
	}
	return fmt.Errorf("the live set kept changing over %d attempts", joinAttempts)
}

// revoke gives a lease back, best effort, with its own short timeout
// (the caller's context may be what failed).
func revoke(cli *clientv3.Client, id clientv3.LeaseID, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := cli.Revoke(ctx, id); err != nil {
		log.Warn("revoke lease", "lease", fmt.Sprintf("%x", int64(id)), "err", err)
	}
}

// renewal is the outcome of one KeepAliveOnce.
type renewal struct {
	sent time.Time
	err  error
}

// run renews the lease every interval until stop, the deadline passes, or
// etcd says the lease is gone. One renewal is in flight at a time, each
// bounded by the interval, so a hung call is replaced by a fresh one.
func (m *Member) run() {
	defer close(m.done)
	tick := time.NewTicker(m.interval)
	defer tick.Stop()
	expire := time.NewTimer(time.Until(m.Deadline()))
	defer expire.Stop()
	results := make(chan renewal, 1)
	rctx, rcancel := context.WithCancel(context.Background())
	inflight := false
	defer func() {
		rcancel()
		if inflight {
			<-results
		}
	}()
	for {
		select {
		case <-m.stop:
			return
		case <-expire.C:
			m.lose(fmt.Errorf("deadline %s passed without a renewal: %w", m.Deadline().Format(time.RFC3339Nano), ErrLost))
			return
		case <-tick.C:
			if inflight || m.isPaused() {
				continue
			}
			inflight = true
			go m.renewOnce(rctx, results)
		case r := <-results:
			inflight = false
			switch {
			case !time.Now().Before(m.Deadline()):
				// An answer that comes after the deadline changes nothing:
				// the fence parent kills at the deadline it was last told,
				// so the member stops there too, whatever etcd says late.
				m.lose(fmt.Errorf("deadline %s passed before a renewal was acknowledged: %w", m.Deadline().Format(time.RFC3339Nano), ErrLost))
				return
			case r.err == nil:
				d := r.sent.Add(m.ttl - m.margin)
				if m.advance(d) {
					expire.Reset(time.Until(d))
				}
			case isLeaseNotFound(r.err):
				m.lose(fmt.Errorf("etcd no longer has lease %x: %w", int64(m.lease), ErrLost))
				return
			case rctx.Err() != nil:
				return
			default:
				m.log.Warn("lease renewal failed; retrying", "err", r.err, "deadline", m.Deadline())
			}
		}
	}
}

// renewOnce sends one renewal, noting when it was sent: the deadline
// counts from the send, the latest moment etcd can have restarted the
// lease's clock (KeepAliveOnce may resend on an unavailable connection,
// which only makes the true send later).
func (m *Member) renewOnce(ctx context.Context, out chan<- renewal) {
	ctx, cancel := context.WithTimeout(ctx, m.interval)
	defer cancel()
	sent := time.Now()
	_, err := m.cli.KeepAliveOnce(ctx, m.lease)
	out <- renewal{sent: sent, err: err}
}

// advance moves the deadline forward to d and publishes it; it reports
// whether d was later than the current one.
func (m *Member) advance(d time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !d.After(m.deadline) {
		return false
	}
	m.deadline = d
	// Latest wins: a reader that fell behind gets the newest deadline,
	// never a stale one. Only run sends, so drain-then-send is safe.
	select {
	case <-m.deadlines:
	default:
	}
	m.deadlines <- d
	return true
}

func (m *Member) lose(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lostErr != nil {
		return
	}
	m.lostErr = err
	close(m.lost)
	m.log.Error("ownership lost", "err", err)
}

func (m *Member) isPaused() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.paused
}

// pauseRenewals stops (true) or resumes sending renewals; tests use it to
// let the deadline pass with etcd healthy.
func (m *Member) pauseRenewals(p bool) {
	m.mu.Lock()
	m.paused = p
	m.mu.Unlock()
}

// Info is the node this member joined as.
func (m *Member) Info() NodeInfo { return m.me }

// LeaseID is the member's lease; every key it owns is on it.
func (m *Member) LeaseID() clientv3.LeaseID { return m.lease }

// TTL is the lease's time to live as the deadline counts it.
func (m *Member) TTL() time.Duration { return m.ttl }

// Deadline is the moment up to which the member may act as owner: the
// last acknowledged renewal's send time + TTL − margin. Past it the
// member must append nothing more.
func (m *Member) Deadline() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.deadline
}

// Deadlines delivers each new deadline, starting with the one from the
// grant; a slow reader gets the newest. It is meant for one reader, the
// one that feeds the fence parent (internal/fence.Reporter).
func (m *Member) Deadlines() <-chan time.Time { return m.deadlines }

// Lost is closed when the deadline passes without a renewal or etcd
// reports the lease gone. It is not closed by Leave or Close.
func (m *Member) Lost() <-chan struct{} { return m.lost }

// Err says why Lost was closed (wrapping ErrLost), or nil.
func (m *Member) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lostErr
}

// alive returns ErrLost (wrapped) when the member may no longer act as
// owner: lost, stopped, or past its deadline.
func (m *Member) alive() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.lostErr != nil:
		return m.lostErr
	case !time.Now().Before(m.deadline):
		return fmt.Errorf("past the deadline %s: %w", m.deadline.Format(time.RFC3339Nano), ErrLost)
	}
	select {
	case <-m.stop:
		return fmt.Errorf("member has left: %w", ErrLost)
	default:
	}
	return nil
}

// Live reads the live nodes from etcd.
func (m *Member) Live(ctx context.Context) ([]NodeInfo, error) {
	return readLive(ctx, m.cli, m.keys)
}

// stopRenewals ends the renewal goroutine and waits for it; from then on
// the member owns nothing (its deadline is now).
func (m *Member) stopRenewals() {
	m.stopOnce.Do(func() {
		close(m.stop)
		<-m.done
		m.mu.Lock()
		if now := time.Now(); now.Before(m.deadline) {
			m.deadline = now
		}
		m.mu.Unlock()
	})
	<-m.done
}

// Leave stops renewing and revokes the lease, which deletes nodes/<node>
// and every owner key of this member at once: the graceful way out
// (SIGTERM). After Lost it still revokes, so others take over before the
// TTL runs out.
func (m *Member) Leave(ctx context.Context) error {
	m.stopRenewals()
	if _, err := m.cli.Revoke(ctx, m.lease); err != nil && !isLeaseNotFound(err) {
		return fmt.Errorf("leave %s: revoke lease: %w", m.me.Node, err)
	}
	m.log.Info("left")
	return nil
}

// Close stops renewing without revoking: the lease, and so the keys,
// expire by themselves within the TTL, as after a crash.
func (m *Member) Close() error {
	m.stopRenewals()
	return nil
}

func isLeaseNotFound(err error) bool { return errors.Is(err, rpctypes.ErrLeaseNotFound) }
