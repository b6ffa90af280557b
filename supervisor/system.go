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
			serveSystemConn(cfg, c, term)
		}()
	}
}

// serveSystemConn answers one connection's requests, a line each, until it
// closes or a write fails.
func serveSystemConn(cfg *config.Config, c *net.UnixConn, term func(*TerminalRequest) *TerminalReply) {
	lr := ipc.NewLineReader(c)
	for {
		line, err := lr.Next()
		if err != nil {
			if errors.Is(err, ipc.ErrTooLarge) {
				c.Write(ipc.ErrorFrame("", err).Line())
			}
			return
		}
		c.SetWriteDeadline(time.Now().Add(ipc.WriteTimeout))
		if _, err := c.Write(systemAnswer(cfg, line, term)); err != nil {
			return
		}
	}
}

// systemAnswer is the line answering one request of the system socket.
func systemAnswer(cfg *config.Config, line []byte, term func(*TerminalRequest) *TerminalReply) []byte {
	if treq, ok, err := parseTerminalRequest(line); ok {
		reply := &TerminalReply{Type: ipc.TypeError, Code: ipc.Code(err)}
		if err != nil {
			reply.Message = err.Error()
		} else {
			<-cfg.Warmed() // a terminal runs ctxterm and tsh from CTX_ROOT/bin
			reply = term(treq)
		}
		b, _ := json.Marshal(reply)
		return append(b, '\n')
	}
	req, err := ipc.ParseRequest(line)
	switch {
	case err != nil:
		return ipc.ErrorFrame("", err).Line()
	case req.Op == ipc.OpPing:
		return (&ipc.Frame{Type: ipc.TypePong, Version: config.Version}).Line()
	}
	return ipc.ErrorFrame("", ipc.Errorf(ipc.CodeBadRequest, "the system socket serves ping and terminal.start|stop|status; send %s to the agent socket", req.Op)).Line()
}
