package run

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	acp "github.com/coder/acp-go-sdk"
	"github.com/cortexfs/ctx/internal/acpclient"
	"github.com/cortexfs/ctx/internal/bwrap"
	"github.com/cortexfs/ctx/internal/imageblob"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/mcphost"
	"github.com/cortexfs/ctx/internal/proc"
	"github.com/cortexfs/ctx/internal/sandbox"
	"github.com/cortexfs/ctx/internal/viewfs"
	"github.com/cortexfs/ctx/ipc"
)

// Starting an acp-v1 run: the agent process in the run's sandbox, its
// secrets, and the client side of its conversation, all off the actor.

// errNoAnswer: the agent did not answer initialize or session/new in time.
var errNoAnswer = errors.New("the ACP agent did not answer")

// errIdle: the agent went silent during the prompt for CTX_ACP_IDLE.
var errIdle = errors.New("the ACP agent went idle")

// ACPSecretsFile is where an acp-v1 agent's secret env values live:
// home/<uid>/secrets/agent/<name>.env (owner-only K=V lines); .d/acp.json
// names the keys.
func ACPSecretsFile(l layout.Layout, agent string) string {
	return filepath.Join(l.UserHome(), "secrets", "agent", agent+".env")
}

// start starts the agent process and the ACP conversation off the
// actor. It counts as one of the run's process starts (X6).
// In phase running only.
func (e *acpEngine) start(c actor.Context) {
	a := e.r
	if a.phase != phaseRunning || !a.takeStart(c) {
		return
	}
	ctx, stop := context.WithCancel(a.ctx)
	e.stop, e.pending, e.open, e.backed, e.order = stop, map[string]func(string){}, map[string]string{}, map[string]bool{}, map[string]int{}
	env := a.view.AgentEnv(0)
	if a.prep != nil {
		maps.Copy(env, a.prep.Env) // spec: W7
	}
	delete(env, "CTX_STEP") // one process for the whole run: there are no steps
	argv := []string{a.view.AgentPath()}
	var binds, keys []string
	if l := a.def.ACP; l != nil {
		if l.Command != "" {
			argv = []string{l.Command}
			binds = append([]string{l.Command}, l.Binds...)
		} else {
			binds = l.Binds
		}
		argv = append(argv, l.Args...)
		keys = l.Env
	}
	if _, set := env["PATH"]; !set { // .d/env may set PATH; it wins, as for other agents
		env["PATH"] = agentPath(argv[0])
	}
	view, cfg, log, input, idle := a.view, a.cfg, a.log, a.spec.Input, a.cfg.ACPIdle
	images, sessDir := a.spec.Images, a.cfg.Layout.SessionDir(a.spec.Agent, a.spec.Scope, a.spec.Session)
	timeout := cfg.ACPTimeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	opts := proc.Options{Bwrap: cfg.Bwrap, Roots: cfg.Roots, Ident: view.Identity(), StdinPipe: true,
		Enter: a.group.EnterFunc(), Place: a.group.PlaceFunc()}
	self, root := c.Self(), c.ActorSystem().Root
	send := func(m any) { root.Send(self, m) }
	terms := &terminals{run: a.spec.RunID, view: view, cfg: cfg, group: a.group, send: send, ctx: ctx, start: a.startProc, m: map[string]*term{}}
	start := a.startProc
	a.startPending = true
	cfg.Procs.Add(1)
	go func() {
		defer cfg.Procs.Done()
		if len(keys) > 0 {
			vals, err := mcphost.ReadEnvFile(cfg.Layout, ACPSecretsFile(cfg.Layout, view.Def.Name))
			if err != nil {
				send(&acpStarted{err: fmt.Errorf("acp-v1 secrets: %w", err), code: ipc.CodeAgentInvalid})
				return
			}
			for _, k := range keys {
				if v, ok := vals[k]; ok {
					env[k] = v
				}
			}
		}
		for _, b := range binds {
			if _, err := os.Stat(b); err != nil {
				send(&acpStarted{err: fmt.Errorf("the agent's installation %s is gone (%v): install it again and recreate the agent", b, err), code: ipc.CodeAgentFailed})
				return
			}
		}
		p, held, err := sandbox.Start(ctx, view, argv, env, func(spec bwrap.Spec) (*proc.Proc, error) {
			for _, b := range binds {
				if !isSystemPath(b) {
					spec.Mounts = append(spec.Mounts, bwrap.Mount{Src: b, Dst: b}) // read-only
				}
			}
			opts.Spec = spec
			return start(opts)
		})
		if err != nil {
			send(&acpStarted{err: err, code: ipc.CodeSandboxUnavailable})
			return
		}
		// Every fs/* request resolves in the sandbox's own root, pinned on
		// first use and closed when the run's process ends: the view is the
		// one authority for files touched on the agent's behalf.
		vroot := viewfs.New(p.Pid())
		client := acpclient.New(acpclient.Host{
			View:  vroot,
			Frame: func(f *ipc.Frame) { send(&acpFrame{f: f}) },
			Approve: func(rctx context.Context, callID, name string, args []string) bool {
				return ask(rctx, ctx, send, callID, name, args)
			},
			Terminals: terms,
			Flood:     func() { send(&acpFlood{}) },
		})
		conn := acp.NewClientSideConnection(client, p.Stdin, client.Throttle(p.Stdout))
		conn.SetLogger(log.With("component", "acp-sdk"))
		send(&acpStarted{p: p, conn: conn})
		cfg.Procs.Add(1)
		go func() {
			defer cfg.Procs.Done()
			<-conn.Done()
			_ = p.Wait()
			held.Ended()
			vroot.Close()
			send(&acpExited{code: p.ExitCode(), stderr: p.Stderr()})
		}()
		prompt := func(caps acp.PromptCapabilities) ([]acp.ContentBlock, error) {
			return acpPrompt(input, images, sessDir, view.Def.Name, caps)
		}
		stopReason, err := converse(ctx, conn, client, send, view.WorkDir(), prompt, timeout, idle)
		if err != nil && !errors.Is(err, errNoAnswer) && !errors.Is(err, errIdle) {
			// The agent is likely gone: give its stderr a moment to be complete.
			select {
			case <-p.Done():
			case <-time.After(time.Second):
			}
		}
		send(&acpEnded{stop: stopReason, err: err, stderr: p.Stderr()})
	}()
}

// converse is the client side of one run: initialize and session/new
// (bounded by timeout), then the prompt (bounded by the run: cancel, and
// by idle: an agent silent that long ends it with errIdle).
func converse(ctx context.Context, conn *acp.ClientSideConnection, client *acpclient.Client, send func(any), cwd string, prompt func(acp.PromptCapabilities) ([]acp.ContentBlock, error), timeout, idle time.Duration) (acp.StopReason, error) {
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	noAnswer := func(what string, err error) error {
		if errors.Is(hctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("%w to %s within %s (CTX_ACP_TIMEOUT)", errNoAnswer, what, timeout)
		}
		return fmt.Errorf("acp %s: %w", what, err)
	}
	ir, err := conn.Initialize(hctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber,
		ClientInfo:         &acp.Implementation{Name: "ctx", Version: "1"},
		ClientCapabilities: acp.ClientCapabilities{Fs: acp.FileSystemCapabilities{ReadTextFile: true, WriteTextFile: true}, Terminal: true}})
	if err != nil {
		return "", noAnswer("initialize", err)
	}
	blocks, err := prompt(ir.AgentCapabilities.PromptCapabilities)
	if err != nil {
		return "", err
	}
	s, err := conn.NewSession(hctx, acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		return "", noAnswer("session/new", err)
	}
	send(&acpSession{id: s.SessionId})
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	var idled atomic.Bool
	if idle > 0 {
		go func() {
			t := time.NewTicker(min(idle/4, time.Second))
			defer t.Stop()
			for {
				select {
				case <-pctx.Done():
					return
				case <-t.C:
					if client.Idle() >= idle {
						idled.Store(true)
						pcancel()
						return
					}
				}
			}
		}()
	}
	r, err := conn.Prompt(pctx, acp.PromptRequest{SessionId: s.SessionId, Prompt: blocks})
	pcancel()
	client.Flush() // a call announced and never said more is recorded all the same
	if idled.Load() {
		return "", fmt.Errorf("%w: no session/update and no request from the agent for %s during the prompt (CTX_ACP_IDLE)", errIdle, idle)
	}
	if err != nil {
		return "", fmt.Errorf("acp session/prompt: %w", err)
	}
	return r.StopReason, nil
}

// agentPath is an acp-v1 agent's PATH when .d/env sets none: the one its
// terminals get (agents spawn shells and tools by name), with the
// directory of the agent's node first when that node is installed outside
// /usr — its launcher may re-exec `node` by name.
func agentPath(cmd string) string {
	if filepath.Base(cmd) == "node" && !isSystemPath(cmd) && filepath.IsAbs(cmd) {
		return filepath.Dir(cmd) + ":" + terminalPath
	}
	return terminalPath
}

// ask hands a permission request to the actor and waits for its answer
// (on the SDK's goroutine, never the actor's).
func ask(rctx, run context.Context, send func(any), callID, name string, args []string) bool {
	reply := make(chan bool, 1)
	send(&acpPermission{callID: callID, name: name, args: args, reply: reply})
	select {
	case ok := <-reply:
		return ok
	case <-rctx.Done():
	case <-run.Done():
	}
	return false
}

func isSystemPath(p string) bool {
	for _, d := range []string{"/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/", "/lib32/"} {
		if len(p) >= len(d) && p[:len(d)] == d {
			return true
		}
	}
	return false
}

// errNoImages: the message attaches images and the acp-v1 agent does not
// advertise promptCapabilities.image.
var errNoImages = errors.New("takes no image input")

// acpPrompt is the session/prompt's content: the input as text, then each
// attached image as an ACP image block, read from the session's blob store
// (imageblob.Read: no link followed, bounded, hash and type checked). Images
// go only to an agent whose initialize answer advertises
// promptCapabilities.image; otherwise the run ends with an error.
func acpPrompt(input string, images []ipc.Image, sessDir, agent string, caps acp.PromptCapabilities) ([]acp.ContentBlock, error) {
	blocks := []acp.ContentBlock{acp.TextBlock(input)}
	if len(images) == 0 {
		return blocks, nil
	}
	if !caps.Image {
		return nil, fmt.Errorf("the ACP agent %s %w (its initialize answer does not advertise promptCapabilities.image); send the message without images", agent, errNoImages)
	}
	for _, im := range images {
		b, mt, err := imageblob.Read(sessDir, im)
		if err != nil {
			return nil, err
		}
		blocks = append(blocks, acp.ImageBlock(base64.StdEncoding.EncodeToString(b), mt))
	}
	return blocks, nil
}
