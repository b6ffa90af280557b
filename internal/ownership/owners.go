package ownership

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// cacheWait bounds how long Acquire and Release wait for the watch to
// show their own write (so a Lookup right after sees it). The write has
// succeeded either way.
const cacheWait = 2 * time.Second

// ownerValue is the JSON of an owner key.
type ownerValue struct {
	Node string `json:"node"`
	Addr string `json:"addr"`
}

// Owners reads and writes the owner keys of one cluster. Lookups are
// answered from a watch-fed cache of the owner/ prefix; Acquire and
// Release go to etcd and need a Member (OpenOwners gives a read-only
// one).
type Owners struct {
	cli  *clientv3.Client
	keys keys
	m    *Member
	c    *cache
	log  *slog.Logger
}

// Owners starts the member's view of the owner keys; Close stops it.
func (m *Member) Owners(ctx context.Context) (*Owners, error) {
	return openOwners(ctx, m.cli, m.keys, m, m.log, nil)
}

// OpenOwners starts a read-only view of cluster's owner keys (for
// status); Acquire and Release return ErrNotMember.
func OpenOwners(ctx context.Context, cli *clientv3.Client, cluster string) (*Owners, error) {
	k, err := keysFor(cluster)
	if err != nil {
		return nil, fmt.Errorf("owners: %w", err)
	}
	return openOwners(ctx, cli, k, nil, slog.Default().With("cluster", cluster), nil)
}

func openOwners(ctx context.Context, cli *clientv3.Client, k keys, m *Member, log *slog.Logger, beforeWatch func(int64)) (*Owners, error) {
	c, err := newCache(ctx, cli, k.owners(), log, beforeWatch)
	if err != nil {
		return nil, fmt.Errorf("owners: %w", err)
	}
	return &Owners{cli: cli, keys: k, m: m, c: c, log: log}, nil
}

// Close stops the watch.
func (o *Owners) Close() { o.c.close() }

// Changed returns a channel closed at the next change of any owner key.
func (o *Owners) Changed() <-chan struct{} { return o.c.changes() }

// Acquire makes the member owner of session unless someone already is,
// in one transaction: if owner/<session> does not exist, create it on
// the member's lease; else read it. won reports whether this call
// created the key; either way Owner is the owner, whose Epoch is the
// key's create revision. An existing key of this very member comes back
// with won false and Owner.Node the member's own: the caller already
// holds that epoch.
func (o *Owners) Acquire(ctx context.Context, session string) (Owner, bool, error) {
	if o.m == nil {
		return Owner{}, false, fmt.Errorf("acquire %s: %w", session, ErrNotMember)
	}
	if err := ValidateSession(session); err != nil {
		return Owner{}, false, fmt.Errorf("acquire: %w", err)
	}
	// A member past its deadline must not take anything new, even if
	// etcd still has its lease.
	if err := o.m.alive(); err != nil {
		return Owner{}, false, fmt.Errorf("acquire %s: %w", session, err)
	}
	me := ownerValue{Node: o.m.me.Node, Addr: o.m.me.Addr}
	value, err := json.Marshal(me)
	if err != nil {
		return Owner{}, false, fmt.Errorf("acquire %s: %w", session, err)
	}
	key := o.keys.owner(session)
	t, err := o.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
	).Then(
		clientv3.OpPut(key, string(value), clientv3.WithLease(o.m.lease)),
	).Else(
		clientv3.OpGet(key),
	).Commit()
	if err != nil {
		return Owner{}, false, fmt.Errorf("acquire %s: %w", session, leaseErr(err))
	}
	if t.Succeeded {
		// The key was created by this transaction: its create revision
		// is the transaction's revision.
		epoch := t.Header.Revision
		o.waitCache(ctx, epoch)
		return Owner{Session: session, Node: me.Node, Addr: me.Addr, Epoch: epoch}, true, nil
	}
	kvs := t.Responses[0].GetResponseRange().Kvs
	if len(kvs) != 1 {
		// The key existed at the compare and not at the read: both run
		// at one revision, so this cannot happen.
		return Owner{}, false, fmt.Errorf("acquire %s: owner key vanished inside a transaction", session)
	}
	w, err := decodeOwner(session, kvs[0].Value, kvs[0].CreateRevision)
	if err != nil {
		return Owner{}, false, fmt.Errorf("acquire: %w", err)
	}
	return w, false, nil
}

// Release deletes the member's owner key of session if its create
// revision is still epoch, so it never removes a newer owner's key; it
// reports whether it deleted.
func (o *Owners) Release(ctx context.Context, session string, epoch int64) (bool, error) {
	if o.m == nil {
		return false, fmt.Errorf("release %s: %w", session, ErrNotMember)
	}
	if err := ValidateSession(session); err != nil {
		return false, fmt.Errorf("release: %w", err)
	}
	key := o.keys.owner(session)
	t, err := o.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(key), "=", epoch),
	).Then(
		clientv3.OpDelete(key),
	).Commit()
	if err != nil {
		return false, fmt.Errorf("release %s at epoch %d: %w", session, epoch, err)
	}
	if t.Succeeded {
		o.waitCache(ctx, t.Header.Revision)
	}
	return t.Succeeded, nil
}

func (o *Owners) waitCache(ctx context.Context, rev int64) {
	wctx, cancel := context.WithTimeout(ctx, cacheWait)
	defer cancel()
	if !o.c.waitRev(wctx, rev) {
		o.log.Debug("owner cache did not reach a write in time", "revision", rev)
	}
}

// Lookup returns the owner of session from the cache; ok is false when
// it has none. The cache trails etcd by the watch's delay (a crashed
// owner's key may linger until its lease expires, as in etcd itself);
// while the cache reloads after a compaction, Lookup reads etcd.
func (o *Owners) Lookup(ctx context.Context, session string) (Owner, bool, error) {
	if err := ValidateSession(session); err != nil {
		return Owner{}, false, fmt.Errorf("lookup: %w", err)
	}
	key := o.keys.owner(session)
	e, ok, synced := o.c.get(key)
	if !synced {
		r, err := o.cli.Get(ctx, key)
		if err != nil {
			return Owner{}, false, fmt.Errorf("lookup %s: %w", session, err)
		}
		if len(r.Kvs) == 0 {
			return Owner{}, false, nil
		}
		e, ok = entry{value: r.Kvs[0].Value, create: r.Kvs[0].CreateRevision}, true
	}
	if !ok {
		return Owner{}, false, nil
	}
	w, err := decodeOwner(session, e.value, e.create)
	if err != nil {
		return Owner{}, false, fmt.Errorf("lookup: %w", err)
	}
	return w, true, nil
}

// List reads every owner key from etcd, in session order (ctx-cluster
// status).
func (o *Owners) List(ctx context.Context) ([]Owner, error) {
	r, err := o.cli.Get(ctx, o.keys.owners(), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("list owners: %w", err)
	}
	out := make([]Owner, 0, len(r.Kvs))
	for _, kv := range r.Kvs {
		w, err := decodeOwner(strings.TrimPrefix(string(kv.Key), o.keys.owners()), kv.Value, kv.CreateRevision)
		if err != nil {
			return nil, fmt.Errorf("list owners: %w", err)
		}
		out = append(out, w)
	}
	return out, nil
}

// Cached returns the cache's owners in session order, without asking
// etcd.
func (o *Owners) Cached() []Owner {
	keys, entries, _ := o.c.snapshot()
	out := make([]Owner, 0, len(keys))
	for i, key := range keys {
		w, err := decodeOwner(strings.TrimPrefix(key, o.keys.owners()), entries[i].value, entries[i].create)
		if err != nil {
			o.log.Warn("skipping an owner key", "err", err)
			continue
		}
		out = append(out, w)
	}
	return out
}

func decodeOwner(session string, value []byte, epoch int64) (Owner, error) {
	var v ownerValue
	if err := json.Unmarshal(value, &v); err != nil {
		return Owner{}, fmt.Errorf("owner of %s: %w", session, err)
	}
	return Owner{Session: session, Node: v.Node, Addr: v.Addr, Epoch: epoch}, nil
}

// leaseErr marks etcd's "lease not found" on a put as ErrLost: the
// member's lease is gone, whatever its own goroutine has noticed yet.
func leaseErr(err error) error {
	if isLeaseNotFound(err) {
		return fmt.Errorf("%w: %w", ErrLost, err)
	}
	return err
}
