// Package ownership keeps, in etcd, which nodes of a cluster are alive
// and which node owns each session. A node joins on a lease it renews
// itself and is owner of its keys only until a deadline it can compute
// without asking etcd; the epoch of an ownership is its key's create
// revision, so a later owner always holds a larger one. The key layout
// and the deadline rule are docs/cluster.md's "etcd keys" and "The
// owner's deadline".
package ownership

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Error classes. Each is wrapped with the operation and the names
// involved; test with errors.Is.
var (
	// ErrVersionMismatch: a live node runs another version, so this one
	// may not join (a cluster never mixes versions).
	ErrVersionMismatch = errors.New("version differs from a live node's")
	// ErrNodeAlive: the node id is already alive in the cluster, on
	// another lease (the same node started twice, or a crashed
	// incarnation whose lease has not expired yet).
	ErrNodeAlive = errors.New("node id already alive")
	// ErrLost: the member's lease is gone or its deadline passed; it owns
	// nothing any more and never gets its lease back.
	ErrLost = errors.New("lease lost")
	// ErrNotMember: a read-only Owners (OpenOwners) was asked to acquire
	// or release.
	ErrNotMember = errors.New("not a member: read-only")
	// ErrInvalid: a cluster name, node id or session id that cannot be
	// put in a key.
	ErrInvalid = errors.New("invalid name")
)

// NodeInfo is the value of nodes/<node>: who the node is and where its
// peers reach it.
type NodeInfo struct {
	Node    string    `json:"node"`
	Addr    string    `json:"addr"`
	Version string    `json:"version"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
}

// Owner is one owner/<agent>/<scope>/<session> key: the node that owns
// the session and the epoch of that ownership (the key's create
// revision).
type Owner struct {
	Session string `json:"-"`
	Node    string `json:"node"`
	Addr    string `json:"addr"`
	Epoch   int64  `json:"-"`
}

// keys builds the etcd keys of one cluster: everything lives under
// /ctx/<cluster>/.
type keys struct{ root string }

func keysFor(cluster string) (keys, error) {
	if err := validName("cluster", cluster); err != nil {
		return keys{}, err
	}
	return keys{root: "/ctx/" + cluster + "/"}, nil
}

func (k keys) nodes() string               { return k.root + "nodes/" }
func (k keys) node(id string) string       { return k.nodes() + id }
func (k keys) owners() string              { return k.root + "owner/" }
func (k keys) owner(session string) string { return k.owners() + session }

// validName accepts a cluster name or node id: one non-empty key
// segment. A slash would move the key into another segment; a control
// byte (NUL above all, Pick's separator) has no business in a name.
func validName(what, s string) error {
	if s == "" {
		return fmt.Errorf("%s %q: empty: %w", what, s, ErrInvalid)
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '/' || s[i] < 0x20 || s[i] == 0x7f {
			return fmt.Errorf("%s %q: byte %q not allowed: %w", what, s, s[i], ErrInvalid)
		}
	}
	return nil
}

// ValidateSession checks a session id, "agent/scope/session": exactly
// three parts, none empty. It is the tail of the owner key, so anything
// else would alias another session's key or escape the owner/ prefix.
func ValidateSession(s string) error {
	agent, rest, ok := strings.Cut(s, "/")
	scope, session, ok2 := strings.Cut(rest, "/")
	switch {
	case !ok || !ok2:
		return fmt.Errorf("session %q: want agent/scope/session: %w", s, ErrInvalid)
	case agent == "" || scope == "" || session == "":
		return fmt.Errorf("session %q: empty part: %w", s, ErrInvalid)
	case strings.Contains(session, "/"):
		return fmt.Errorf("session %q: more than three parts: %w", s, ErrInvalid)
	}
	return nil
}

// SessionID joins the parts of a session id (not validated).
func SessionID(agent, scope, session string) string {
	return agent + "/" + scope + "/" + session
}
