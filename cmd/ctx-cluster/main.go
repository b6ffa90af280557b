// Command ctx-cluster runs ctx on several machines (interfaces.md
// Cluster, docs/cluster.md):
//
//	ctx-cluster init --dir DIR --nodes ID[,ID…] [--hosts ADDR,…]   the CA and certificates
//	ctx-cluster daemon --cluster FILE                             one node, in the foreground
//	ctx-cluster status --cluster FILE [--json]                    nodes and sessions
//
// It is the only binary that links the cluster's code; ctx and ctxd link
// none of it.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/cortexfs/ctx/cluster"
	"github.com/cortexfs/ctx/internal/clustercert"
	"github.com/cortexfs/ctx/internal/clusterconf"
	"github.com/cortexfs/ctx/internal/exitcode"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/version"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// env is what every command gets (bound with kong.Bind).
type env struct {
	ctx    context.Context
	stdout io.Writer
}

type cli struct {
	Version kong.VersionFlag `short:"V" help:"Print the version and exit."`
	Init    initCmd          `cmd:"" help:"Write a new CA and the certificates of the nodes and of etcd into DIR."`
	Daemon  daemonCmd        `cmd:"" help:"Run one node of the cluster in the foreground."`
	Status  statusCmd        `cmd:"" help:"Show the cluster's nodes and sessions."`
}

type initCmd struct {
	Dir   string   `required:"" type:"path" placeholder:"DIR" help:"Directory for the CA, certificates and keys (made 0700; refused if it holds a CA)."`
	Nodes []string `required:"" placeholder:"ID" help:"The nodes' names, one certificate each."`
	Hosts []string `placeholder:"ADDR" help:"IP addresses and DNS names nodes and etcd are reached at (127.0.0.1, ::1 and localhost are always added)."`
}

func (c *initCmd) Run(e *env) error {
	if err := clustercert.Init(c.Dir, c.Nodes, c.Hosts); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s: %s, %s (the CA)\n", c.Dir, clustercert.CACert, clustercert.CAKey)
	for _, n := range c.Nodes {
		fmt.Fprintf(e.stdout, "%s: %s, %s (node %s)\n", c.Dir, clustercert.NodeCert(n), clustercert.NodeKey(n), n)
	}
	fmt.Fprintf(e.stdout, "%s: %s, %s (etcd's clients)\n", c.Dir, clustercert.EtcdClientCert, clustercert.EtcdClientKey)
	fmt.Fprintf(e.stdout, "%s: %s, %s (etcd's server)\n", c.Dir, clustercert.EtcdServerCert, clustercert.EtcdServerKey)
	return nil
}

type daemonCmd struct {
	Cluster string `required:"" type:"path" placeholder:"FILE" help:"The cluster file (JSON)."`
}

func (c *daemonCmd) Run(e *env) error {
	cfg, err := clusterconf.Load(c.Cluster)
	if err != nil {
		return err
	}
	// A node without its certificates refuses to start, before it joins
	// anything; the node loads them again for use.
	if _, _, err := clustercert.NodeTLS(cfg.TLSDir, cfg.Node); err != nil {
		return err
	}
	return cluster.Daemon(e.ctx, cfg)
}

type statusCmd struct {
	Cluster string `required:"" type:"path" placeholder:"FILE" help:"The cluster file (JSON)."`
	JSON    bool   `name:"json" help:"One JSON object: nodes and sessions."`
}

func (c *statusCmd) Run(e *env) error {
	cfg, err := clusterconf.Load(c.Cluster)
	if err != nil {
		return err
	}
	return cluster.Status(e.ctx, cfg, c.JSON, e.stdout)
}

// exited carries kong's exit status (--help, --version) out of Parse, so
// that run returns it rather than kong ending the process.
type exited struct{ code int }

func run(args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(exited)
			if !ok {
				panic(r)
			}
			code = e.code
		}
	}()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var c cli
	parser, err := kong.New(&c, kong.Name("ctx-cluster"),
		kong.Description("ctx on several machines: one node per machine, etcd owning placement."),
		kong.Writers(stdout, stderr), kong.Exit(func(code int) { panic(exited{code}) }),
		kong.Vars{"version": "ctx-cluster " + version.Version},
		kong.Bind(&env{ctx: ctx, stdout: stdout}))
	if err != nil {
		fmt.Fprintln(stderr, "ctx-cluster:", err)
		return exitcode.Usage
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		fmt.Fprintln(stderr, "ctx-cluster:", err)
		return exitcode.Usage
	}
	if err := kctx.Run(); err != nil {
		fmt.Fprintln(stderr, "ctx-cluster:", err)
		return codeOf(err)
	}
	return exitcode.OK
}

// codeOf maps an error to the exit status (internal/exitcode): a bad
// file, name, directory or missing certificate is invalid input.
func codeOf(err error) int {
	var ee *exitcode.Error
	switch {
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, clusterconf.ErrInvalid), errors.Is(err, clustercert.ErrInvalid),
		errors.Is(err, clustercert.ErrExists), errors.Is(err, clustercert.ErrMaterial),
		errors.Is(err, layout.ErrBadName), errors.Is(err, fs.ErrNotExist):
		return exitcode.Usage
	}
	return exitcode.RunError
}
