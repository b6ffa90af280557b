package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// cmdlineScan reads every /proc/*/cmdline over and over until stopped,
// noting each process whose command line holds one of the canaries, and
// how many bwrap processes it saw (so a clean scan proves it watched).
type cmdlineScan struct {
	canaries []string
	stop     chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	hits     []string
	seen     map[string]bool
	bwraps   map[int]bool
}

func scanCmdlines(canaries ...string) *cmdlineScan {
	s := &cmdlineScan{canaries: canaries, stop: make(chan struct{}), done: make(chan struct{}), seen: map[string]bool{}, bwraps: map[int]bool{}}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				return
			default:
			}
			ents, _ := os.ReadDir("/proc")
			for _, e := range ents {
				pid, err := strconv.Atoi(e.Name())
				if err != nil {
					continue
				}
				b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
				if err != nil || len(b) == 0 {
					continue
				}
				line := strings.ReplaceAll(string(b), "\x00", " ")
				s.mu.Lock()
				if strings.HasPrefix(line, "/usr/bin/bwrap ") || strings.HasPrefix(line, "bwrap ") {
					s.bwraps[pid] = true
				}
				for _, c := range s.canaries {
					if strings.Contains(line, c) && !s.seen[c] {
						s.seen[c] = true // the first process each canary was seen in
						s.hits = append(s.hits, c+" in pid "+e.Name()+": "+line)
					}
				}
				s.mu.Unlock()
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return s
}

func (s *cmdlineScan) end() (hits []string, bwraps int) {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits, len(s.bwraps)
}

// TestSecurityHostSecretsOffCommandLine: no secret is on any command line.
// While an agent with a .d/env value runs a step, an MCP server with an
// --env value answers calls, and an acp-v1 agent with a secret key
// converses, every /proc/*/cmdline on the host (bwrap's, which is also
// the sandbox's own /proc/1/cmdline, and every other) is read again and
// again: no canary value appears; each value did reach its process.
// spec: X11, B3
func TestSecurityHostSecretsOffCommandLine(t *testing.T) {
	w := newWorld(t)
	acpBin := ""
	if acpSDKDir() != "" {
		if _, err := exec.LookPath("node"); err == nil {
			acpBin = acpAgentInstall(t, w)
		}
	}
	w.start("CTX_ACP_TIMEOUT=10s")
	id := strconv.Itoa(os.Getpid()) + strconv.FormatInt(time.Now().UnixNano()%100000, 36)
	dEnv, mcpEnv, acpEnv := "denv-canary-"+id, "mcpenv-canary-"+id, "acpkey-canary-"+id
	scan := scanCmdlines(dEnv, mcpEnv, acpEnv)
	defer func() {
		if scan != nil {
			scan.end()
		}
	}()

	// .d/env of an executable agent, during a step that lasts a second.
	w.agent("e", map[string]string{"env": "DENV_CANARY=" + dEnv + "\n"})
	c := w.dial("e")
	c.send(sendReq("s1", "sleep 1", "workspace", w.workspace()))
	if d := lastOf(c.until("done", 30*time.Second), "done"); d.Status != "ok" {
		t.Errorf("the .d/env agent's run: %s", d.raw)
	}

	// An MCP server's --env value, while the server runs.
	w.tool("probe", "#!/bin/sh\nfor f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\\0' '\\n' < $f; done 2>/dev/null | grep -c \"mcpenv-can[a]ry-$1\"\necho procs=$(ls -d /proc/[0-9]* | wc -l)\n")
	w.agent("m", map[string]string{"tools": "probe\n"})
	// --env KEY takes the value from ctx's environment: `--env K=V` would
	// put it on ctx mcp add's own command line.
	add := exec.Command(w.ctxBin, "mcp", "add", "ok", "--env", "MCP_CANARY", "--", binDir+"/mcpfake", "ok")
	add.Env = w.env("MCP_CANARY=" + mcpEnv)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ctx mcp add: %v %s", err, out)
	}
	ws := w.workspace()
	if r := w.tsh(ws, "m", "call", "ok.getenv", "name=MCP_CANARY"); r.code != 0 || !strings.Contains(r.stdout, "MCP_CANARY set=true") {
		t.Errorf("the MCP server did not get its --env value: %d %q %q", r.code, r.stdout, r.stderr)
	}
	time.Sleep(300 * time.Millisecond) // the server runs on: scanned a while longer
	// The agent itself, from a tool while the server runs, finds the
	// value in no /proc it can see (its own PID namespace). The tool
	// greps for a pattern, not the canary: the canary itself would be on
	// its own command line.
	if r := w.tsh(ws, "m", "call", "probe", id); !strings.Contains(r.stdout, "procs=") || !strings.HasPrefix(r.stdout, "0\n") {
		t.Errorf("the agent's tool looking for the server's secret: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if r := w.tsh(ws, "m", "call", "ok.hello", "name=x"); r.code != 0 {
		t.Errorf("second call: %d %q %q", r.code, r.stdout, r.stderr)
	}

	// An acp-v1 agent's secret key, during a conversation.
	if acpBin == "" {
		t.Log("the ACP SDK or node is not installed (scripts/acp-sdk.sh): the acp-v1 part is not run")
	} else {
		w.mustCtx("agent", "create", "acpa", "--abi", "acp-v1", "--exec", acpBin, "--approval", "auto")
		acl := filepath.Join(w.root, "agent", "acpa.d", "acp.json")
		b, err := os.ReadFile(acl)
		if err != nil {
			t.Fatal(err)
		}
		var decl map[string]any
		if err := json.Unmarshal(b, &decl); err != nil {
			t.Fatal(err)
		}
		decl["env"] = []string{"ACP_SECRET"}
		b, _ = json.Marshal(decl)
		w.mustCtx("agent", "set", "acpa", "acp.json", string(b))
		sec := filepath.Join(w.root, "home", itoa(os.Getuid()), "secrets", "agent")
		os.MkdirAll(sec, 0o700)
		if err := os.WriteFile(filepath.Join(sec, "acpa.env"), []byte("ACP_SECRET="+acpEnv+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		ac := w.dial("acpa")
		ac.send(sendReq("a1", "env"))
		fs := ac.until("done", 60*time.Second)
		if got := lastOf(fs, "assistant").Text; !strings.Contains(got, "secret="+acpEnv) {
			t.Errorf("the acp-v1 agent did not get its secret: %q\n%s", got, rawFrames(fs))
		}
	}

	hits, bwraps := scan.end()
	scan = nil
	for _, h := range hits {
		t.Errorf("a secret on a command line: %s", h)
	}
	if bwraps < 3 {
		t.Errorf("the scan saw %d bwrap processes: it proved nothing", bwraps)
	}
	t.Logf("scanned; %d bwrap processes seen", bwraps)
}
