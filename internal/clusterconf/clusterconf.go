// Package clusterconf reads a cluster node's file (interfaces.md Cluster:
// `ctx-cluster daemon --cluster FILE`): one strict JSON object whose every
// key is required and no other key allowed, validated before a node
// touches etcd, its certificates or its directories.
package clusterconf

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cortexfs/ctx/internal/clustercert"
	"github.com/cortexfs/ctx/internal/jsonobj"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/pathin"
)

// ErrInvalid is wrapped by every error about the file's content.
var ErrInvalid = errors.New("invalid cluster file")

// Config is a node's view of its cluster. Paths are absolute and clean.
type Config struct {
	Cluster    string   `json:"cluster"`     // the cluster's name; etcd keys live under /ctx/<cluster>/
	Node       string   `json:"node"`        // this node's name, as its certificate names it
	Listen     string   `json:"listen"`      // HOST:PORT of node-to-node traffic
	Etcd       []string `json:"etcd"`        // https:// endpoints
	TLSDir     string   `json:"tls_dir"`     // what `ctx-cluster init` wrote
	Root       string   `json:"root"`        // the shared CTX_ROOT
	RuntimeDir string   `json:"runtime_dir"` // this node's own sockets (CTX_RUNTIME_DIR)
	Workspaces []string `json:"workspaces"`  // shared prefixes a workspace must lie under
}

// keys are the file's keys, all required (interfaces.md Cluster).
var keys = []string{"cluster", "node", "listen", "etcd", "tls_dir", "root", "runtime_dir", "workspaces"}

// maxFile bounds a cluster file: a few hundred bytes in practice.
const maxFile = 1 << 20

// Load reads and validates the cluster file at path.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cluster file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("cluster file %s: %w", path, err)
	}
	if len(b) > maxFile {
		return nil, fmt.Errorf("cluster file %s: larger than %d bytes: %w", path, maxFile, ErrInvalid)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("cluster file %s: %w", path, err)
	}
	return c, nil
}

// Parse validates a cluster file's bytes.
func Parse(b []byte) (*Config, error) {
	m, err := jsonobj.Keys(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	// interfaces.md Cluster: unknown keys are an error.
	if err := jsonobj.Only(m, keys...); err != nil {
		return nil, fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return nil, fmt.Errorf("missing key %q: %w", k, ErrInvalid)
		}
	}
	var c Config
	for _, f := range []struct {
		key string
		s   *string
	}{{"cluster", &c.Cluster}, {"node", &c.Node}, {"listen", &c.Listen}, {"tls_dir", &c.TLSDir}, {"root", &c.Root}, {"runtime_dir", &c.RuntimeDir}} {
		if err := decodeString(m[f.key], f.s); err != nil {
			return nil, fmt.Errorf("%q: %w", f.key, err)
		}
	}
	for _, f := range []struct {
		key string
		l   *[]string
	}{{"etcd", &c.Etcd}, {"workspaces", &c.Workspaces}} {
		if err := decodeStrings(m[f.key], f.l); err != nil {
			return nil, fmt.Errorf("%q: %w", f.key, err)
		}
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func decodeString(raw json.RawMessage, s *string) error {
	// null would decode as "" without error; say what is wrong instead.
	if len(raw) == 0 || raw[0] != '"' {
		return fmt.Errorf("want a string: %w", ErrInvalid)
	}
	if err := json.Unmarshal(raw, s); err != nil {
		return fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	return nil
}

func decodeStrings(raw json.RawMessage, l *[]string) error {
	if len(raw) == 0 || raw[0] != '[' {
		return fmt.Errorf("want an array of strings: %w", ErrInvalid)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	out := make([]string, len(items))
	for i, it := range items {
		if err := decodeString(it, &out[i]); err != nil {
			return fmt.Errorf("item %d: %w", i, err)
		}
	}
	*l = out
	return nil
}

func (c *Config) validate() error {
	if err := layout.CheckName("cluster", c.Cluster); err != nil {
		return fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	// The node's name is also its certificate files' stem.
	if err := clustercert.CheckNode(c.Node); err != nil {
		return fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	if err := checkListen(c.Listen); err != nil {
		return fmt.Errorf("\"listen\" %q: %w", c.Listen, err)
	}
	if len(c.Etcd) == 0 {
		return fmt.Errorf("\"etcd\": no endpoint: %w", ErrInvalid)
	}
	seen := map[string]bool{}
	for _, e := range c.Etcd {
		if err := checkEtcd(e); err != nil {
			return fmt.Errorf("\"etcd\" %q: %w", e, err)
		}
		if seen[e] {
			return fmt.Errorf("\"etcd\" %q given twice: %w", e, ErrInvalid)
		}
		seen[e] = true
	}
	for _, p := range []struct {
		key string
		s   *string
	}{{"tls_dir", &c.TLSDir}, {"root", &c.Root}, {"runtime_dir", &c.RuntimeDir}} {
		clean, err := cleanPath(*p.s)
		if err != nil {
			return fmt.Errorf("%q: %w", p.key, err)
		}
		*p.s = clean
	}
	if len(c.Workspaces) == 0 {
		return fmt.Errorf("\"workspaces\": no shared prefix: %w", ErrInvalid)
	}
	seen = map[string]bool{}
	for i, w := range c.Workspaces {
		clean, err := cleanPath(w)
		if err != nil {
			return fmt.Errorf("\"workspaces\": %w", err)
		}
		if seen[clean] {
			return fmt.Errorf("\"workspaces\": %q given twice: %w", clean, ErrInvalid)
		}
		seen[clean] = true
		c.Workspaces[i] = clean
	}
	// The runtime directory is this node's alone (its sockets); root and
	// the workspaces are every node's. One inside the other would have
	// nodes share sockets or keep shared state on one node.
	if pathin.Inside(c.RuntimeDir, c.Root) {
		return fmt.Errorf("\"runtime_dir\" %s lies under \"root\" %s: the runtime directory is node-local, the root shared: %w", c.RuntimeDir, c.Root, ErrInvalid)
	}
	if c.Shared(c.RuntimeDir) {
		return fmt.Errorf("\"runtime_dir\" %s lies under a shared workspace prefix: the runtime directory is node-local: %w", c.RuntimeDir, ErrInvalid)
	}
	return nil
}

// cleanPath accepts an absolute path and returns it clean. A ".."
// component is refused rather than cleaned away: the kernel resolves it
// after symlinks, so "/srv/link/.." need not be "/srv".
func cleanPath(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%q is not an absolute path: %w", p, ErrInvalid)
	}
	if hasDotDot(p) {
		return "", fmt.Errorf("%q has a .. component: %w", p, ErrInvalid)
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", fmt.Errorf("%q holds a NUL byte: %w", p, ErrInvalid)
	}
	return filepath.Clean(p), nil
}

// checkListen accepts HOST:PORT with a host (other nodes dial it, and the
// node's certificate must name it, so it is an IP address or DNS name)
// and a numeric port.
func checkListen(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("want HOST:PORT: %w", ErrInvalid)
	}
	if host == "" {
		return fmt.Errorf("want HOST:PORT with a host: %w", ErrInvalid)
	}
	if err := clustercert.CheckHost(host); err != nil {
		return fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	return checkPort(port)
}

// checkPort accepts a decimal port, 0 (the system picks one, for tests)
// to 65535.
func checkPort(port string) error {
	if port == "" || len(port) > 5 || strings.TrimLeft(port, "0123456789") != "" {
		return fmt.Errorf("port %q is not a number: %w", port, ErrInvalid)
	}
	if n, err := strconv.Atoi(port); err != nil || n > 65535 {
		return fmt.Errorf("port %q is out of range: %w", port, ErrInvalid)
	}
	return nil
}

// checkEtcd accepts https://HOST:PORT only: etcd is reached over mTLS,
// never in clear (interfaces.md Cluster).
func checkEtcd(e string) error {
	if !strings.HasPrefix(e, "https://") {
		return fmt.Errorf("want an https:// URL (etcd is reached over mutual TLS only): %w", ErrInvalid)
	}
	u, err := url.Parse(e)
	if err != nil {
		return fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery || strings.Contains(e, "#") {
		return fmt.Errorf("want https://HOST:PORT and nothing else: %w", ErrInvalid)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("no host: %w", ErrInvalid)
	}
	if err := clustercert.CheckHost(u.Hostname()); err != nil {
		return fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	if u.Port() == "" {
		return fmt.Errorf("no port (etcd's client port is usually 2379): %w", ErrInvalid)
	}
	return checkPort(u.Port())
}

// Shared reports whether workspace — a path the daemon has already
// resolved (symlinks included) — is one of the shared prefixes or lies
// under one, component by component: "/a/bc" is not under "/a/b"
// (interfaces.md Cluster: workspace_not_shared otherwise). A relative path
// or one with a ".." component is not shared: a resolved path has none,
// and lexical cleaning could lift it under a prefix it is not under.
func (c *Config) Shared(workspace string) bool {
	if !filepath.IsAbs(workspace) || hasDotDot(workspace) {
		return false
	}
	for _, w := range c.Workspaces {
		if pathin.Inside(workspace, w) {
			return true
		}
	}
	return false
}

func hasDotDot(p string) bool {
	for _, e := range strings.Split(p, "/") {
		if e == ".." {
			return true
		}
	}
	return false
}
