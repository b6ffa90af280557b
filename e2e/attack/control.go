package main

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ctl-update: the control socket (docs/walls.md) — speak its protocol
// directly, without the agent.update tool (and so without the checks in
// front of a tool call), to replace this agent's own control file. It
// reports whether the socket is in the view and the host's answer.
// Usage: attack ctl-update [--wait FILE] [--repeat N] CONTROL CONTENT [SOCKET...]
// (default socket: $CTX_CONTROL_SOCKET, else /run/cortexfs/control.sock;
// --wait first creates FILE.ready, then waits up to 60 s for FILE).
func init() {
	register("ctl-update", func(args []string) int {
		if len(args) >= 2 && args[0] == "--wait" {
			os.WriteFile(args[1]+".ready", nil, 0o644) // the test may go on
			deadline := time.Now().Add(60 * time.Second)
			for time.Now().Before(deadline) {
				if _, err := os.Stat(args[1]); err == nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			args = args[2:]
		}
		repeat := 1
		if len(args) >= 2 && args[0] == "--repeat" {
			repeat, _ = strconv.Atoi(args[1])
			args = args[2:]
		}
		if len(args) < 2 {
			say("error", "usage: ctl-update [--wait FILE] [--repeat N] CONTROL CONTENT [SOCKET...]")
			return 2
		}
		socks := args[2:]
		if len(socks) == 0 {
			p := os.Getenv("CTX_CONTROL_SOCKET")
			if p == "" {
				p = "/run/cortexfs/control.sock"
			}
			socks = []string{p}
		}
		ents, err := os.ReadDir("/run/cortexfs")
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		say("run_cortexfs", result(err)+" ["+strings.Join(names, " ")+"]")
		session := os.Getenv("CTX_SESSION")
		if parts := strings.SplitN(os.Getenv("CTX_AGENT_SUBJECT"), ":", 3); session == "" && len(parts) == 3 {
			session = parts[2]
		}
		stamp := time.Now().Format("150405.000000000")
		for _, p := range socks {
			if _, err := os.Lstat(p); err != nil {
				say("socket:"+p, "absent: "+err.Error())
				continue
			}
			say("socket:"+p, "present")
			// --repeat sends N frames at once, each with its own id.
			answers := make([]string, repeat)
			var wg sync.WaitGroup
			for i := range answers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					frame, _ := json.Marshal(map[string]string{"op": "agent.update", "request_id": "attack-" + stamp + "-" + strconv.Itoa(i),
						"agent": os.Getenv("CTX_AGENT"), "session": session, "run": os.Getenv("CTX_RUN"), "control": args[0], "content": args[1]})
					answers[i] = send(p, frame)
				}()
			}
			wg.Wait()
			for i, a := range answers {
				key := "answer:" + p
				if repeat > 1 {
					key += ":" + strconv.Itoa(i)
				}
				say(key, a)
			}
		}
		return 0
	})
}

// send sends one frame on the socket at p and returns the answer line.
func send(p string, frame []byte) string {
	c, err := net.DialTimeout("unix", p, 5*time.Second)
	if err != nil {
		return "dial: " + err.Error()
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(120 * time.Second))
	c.Write(append(frame, '\n'))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil && line == "" {
		return "none: " + err.Error()
	}
	return strings.TrimSpace(line)
}
