package ownership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// entry is one key of a watched prefix as the cache holds it.
type entry struct {
	value  []byte
	create int64
	lease  int64
}

// cache mirrors every key under one prefix, fed by a watch, so reads are
// local. It starts from a Get at revision R and watches from R+1. A watch
// that ends for a transient reason (the member lost its leader, the
// connection broke) is resumed from the last revision applied, missing
// nothing; a watch that ends because etcd compacted past that revision
// cannot be resumed, so the cache reloads the whole prefix with a Get
// and watches again from there. Between the end of a watch and the
// reload the cache is marked unsynced and callers read etcd instead.
type cache struct {
	cli    *clientv3.Client
	prefix string
	log    *slog.Logger

	mu      sync.Mutex
	kvs     map[string]entry
	rev     int64 // the revision the map reflects
	synced  bool
	changed chan struct{} // closed and replaced on every applied change
	kick    context.CancelFunc

	// beforeWatch, when set (tests only, before start), runs before every
	// Watch call with the revision the watch will start at.
	beforeWatch func(from int64)

	loads atomic.Int64 // full reads of the prefix, for tests

	cancel context.CancelFunc
	done   chan struct{}
}

// resyncBackoff bounds the pause between failed reloads.
const (
	resyncBackoffMin = 100 * time.Millisecond
	resyncBackoffMax = 2 * time.Second
)

// newCache loads the prefix (with ctx) and starts the watch goroutine,
// which runs until close.
func newCache(ctx context.Context, cli *clientv3.Client, prefix string, log *slog.Logger, beforeWatch func(int64)) (*cache, error) {
	c := &cache{
		cli:         cli,
		prefix:      prefix,
		log:         log,
		changed:     make(chan struct{}),
		beforeWatch: beforeWatch,
		done:        make(chan struct{}),
	}
	if err := c.load(ctx); err != nil {
		return nil, err
	}
	var runCtx context.Context
	runCtx, c.cancel = context.WithCancel(context.Background())
	go c.run(runCtx)
	return c, nil
}

// close stops the watch and waits for the goroutine to end.
func (c *cache) close() {
	c.cancel()
	<-c.done
}

// load replaces the map with a fresh read of the prefix.
func (c *cache) load(ctx context.Context) error {
	r, err := c.cli.Get(ctx, c.prefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("read %s: %w", c.prefix, err)
	}
	c.loads.Add(1)
	kvs := make(map[string]entry, len(r.Kvs))
	for _, kv := range r.Kvs {
		kvs[string(kv.Key)] = entry{value: kv.Value, create: kv.CreateRevision, lease: kv.Lease}
	}
	c.mu.Lock()
	c.kvs, c.rev, c.synced = kvs, r.Header.Revision, true
	c.notifyLocked()
	c.mu.Unlock()
	return nil
}

func (c *cache) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *cache) run(ctx context.Context) {
	defer close(c.done)
	backoff := resyncBackoffMin
	for ctx.Err() == nil {
		c.mu.Lock()
		from := c.rev + 1
		wctx, kick := context.WithCancel(clientv3.WithRequireLeader(ctx))
		c.kick = kick
		c.mu.Unlock()
		if c.beforeWatch != nil {
			c.beforeWatch(from)
		}
		compacted, applied := c.watch(wctx, from)
		kicked := wctx.Err() != nil
		kick()
		if ctx.Err() != nil {
			return
		}
		if compacted {
			c.resync(ctx)
			continue
		}
		if applied || kicked {
			backoff = resyncBackoffMin
			continue
		}
		// A watch that ended before delivering anything (no leader, a
		// closed client) is not retried in a tight loop.
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, resyncBackoffMax)
	}
}

// watch applies events from revision from until the watch ends; it
// reports whether it ended because that revision was compacted away, and
// whether it applied any event.
func (c *cache) watch(ctx context.Context, from int64) (compacted, applied bool) {
	wch := c.cli.Watch(ctx, c.prefix, clientv3.WithPrefix(), clientv3.WithRev(from))
	for resp := range wch {
		if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
			c.log.Info("watch fell behind a compaction; reloading", "prefix", c.prefix, "from", from, "compacted", resp.CompactRevision)
			return true, applied
		}
		if err := resp.Err(); err != nil {
			c.log.Warn("watch ended; resuming", "prefix", c.prefix, "err", err)
			return false, applied
		}
		if len(resp.Events) > 0 {
			applied = true
		}
		c.apply(resp)
	}
	return false, applied
}

func (c *cache) apply(resp clientv3.WatchResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ev := range resp.Events {
		// The revision applied is the events' own, not the header's: a
		// watch catching up sends the current revision in its header
		// while later events are still to come, and resuming from the
		// header would skip them.
		c.rev = max(c.rev, ev.Kv.ModRevision)
		k := string(ev.Kv.Key)
		switch ev.Type {
		case mvccpb.PUT:
			c.kvs[k] = entry{value: ev.Kv.Value, create: ev.Kv.CreateRevision, lease: ev.Kv.Lease}
		case mvccpb.DELETE:
			delete(c.kvs, k)
		}
	}
	if len(resp.Events) > 0 {
		c.notifyLocked()
	}
}

// resync reloads the prefix until it succeeds or ctx ends.
func (c *cache) resync(ctx context.Context) {
	c.mu.Lock()
	c.synced = false
	c.mu.Unlock()
	backoff := resyncBackoffMin
	for {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.load(lctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return
		}
		c.log.Warn("reload failed; retrying", "prefix", c.prefix, "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, resyncBackoffMax)
	}
}

// restartWatch ends the current watch; the loop resumes it from the
// last applied revision (tests use it to put the watch behind a
// compaction).
func (c *cache) restartWatch() {
	c.mu.Lock()
	if c.kick != nil {
		c.kick()
	}
	c.mu.Unlock()
}

// get returns the entry of key; ok is false when absent. synced is false
// while the cache reloads, when the caller should read etcd instead.
func (c *cache) get(key string) (e entry, ok, synced bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok = c.kvs[key]
	return e, ok, c.synced
}

// snapshot returns the keys and entries in key order, and whether the
// cache is synced.
func (c *cache) snapshot() (keys []string, entries []entry, synced bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys = make([]string, 0, len(c.kvs))
	for k := range c.kvs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	entries = make([]entry, len(keys))
	for i, k := range keys {
		entries[i] = c.kvs[k]
	}
	return keys, entries, c.synced
}

// changes returns a channel closed at the next applied change.
func (c *cache) changes() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// waitRev waits until the cache reflects revision rev or ctx ends; it
// reports whether it does.
func (c *cache) waitRev(ctx context.Context, rev int64) bool {
	for {
		c.mu.Lock()
		ok, ch := c.rev >= rev, c.changed
		c.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		case <-c.done:
			return false
		}
	}
}
