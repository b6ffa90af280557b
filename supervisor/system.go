package supervisor

import (
	"encoding/json"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/cortexfs/ctx/internal/config"
	"github.com/cortexfs/ctx/ipc"
)

// serveSystem serves the system socket: ping (readiness) and the terminal
// ops (terminals.go), answered by term. A4: the owner or uid 0.
func serveSystem(cfg *config.Config, ln *net.UnixListener, term func(*TerminalRequest) *TerminalReply) {
	var wg sync.WaitGroup
	defer wg.Wait()
	var mu sync.Mutex
	conns := map[*net.UnixConn]bool{}
	defer func() {
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		cred, err := ipc.PeerCred(c)
		if err != nil || (int(cred.Uid) != cfg.Layout.UID && cred.Uid != 0) { // spec: A4
			uid := -1
			if cred != nil {
				uid = int(cred.Uid)
			}
			cfg.Log.Warn("system socket refused a connection", "uid", uid)
			c.Close()
			continue
		}
		mu.Lock()
		conns[c] = true
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { mu.Lock(); delete(conns, c); mu.Unlock(); c.Close() }()
			lr := ipc.NewLineReader(c)
			for {
				line, err := lr.Next()
				if err != nil {
					if errors.Is(err, ipc.ErrTooLarge) {
						c.Write(ipc.ErrorFrame("", err).Line())
					}
					return
				}
				if treq, ok, err := parseTerminalRequest(line); ok {
					reply := &TerminalReply{Type: ipc.TypeError, Code: ipc.Code(err)}
					if err != nil {
						reply.Message = err.Error()
					} else {
						<-cfg.Warmed() // a terminal runs ctxterm and tsh from CTX_ROOT/bin
						reply = term(treq)
					}
					b, _ := json.Marshal(reply)
					c.SetWriteDeadline(time.Now().Add(ipc.WriteTimeout))
					if _, err := c.Write(append(b, '\n')); err != nil {
						return
					}
					continue
				}
				req, err := ipc.ParseRequest(line)
				var f *ipc.Frame
				switch {
				case err != nil:
					f = ipc.ErrorFrame("", err)
				case req.Op == ipc.OpPing:
					f = &ipc.Frame{Type: ipc.TypePong, Version: config.Version}
				default:
					f = ipc.ErrorFrame("", ipc.Errorf(ipc.CodeBadRequest, "the system socket serves ping and terminal.start|stop|status; send %s to the agent socket", req.Op))
				}
				c.SetWriteDeadline(time.Now().Add(ipc.WriteTimeout))
				if _, err := c.Write(f.Line()); err != nil {
					return
				}
			}
		}()
	}
}
