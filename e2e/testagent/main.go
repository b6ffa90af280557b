// Command testagent is the e2e tests' sdk-envelope-v1 agent. Its behaviour
// is chosen by the first word of the input:
//
//	echo TEXT        answer "echo: TEXT"
//	capture          write stdin and the environment to /workspace, call tsh once, then answer
//	calls N          make a tool call (tsh list) at every step until N calls were made
//	reuse            use the same call id at steps 0 and 1
//	bad KIND         emit invalid output of KIND (result, approval, done, json, two-calls, after-call, exit, unknown-field)
//	trap MARKER      ignore SIGTERM, start a setsid grandchild, print a delta, sleep
//	sleep SECONDS    print a delta, sleep, answer
//	spew N           print N deltas of 100 bytes, then answer
//	tool NAME ARGS…  call the tool NAME with ARGS at step 0, then answer with its result
//	see PATH…        list each directory, run each other path; answer what happened
//	run PATH ARGS…   run PATH with ARGS in the agent step itself; answer its output
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var out = json.NewEncoder(os.Stdout)

func delta(s string) { _ = out.Encode(map[string]string{"type": "delta", "text": s}) }
func call(id, name string, args ...string) {
	if args == nil {
		args = []string{}
	}
	_ = out.Encode(map[string]any{"type": "tool_call", "id": id, "name": name, "args": args})
}

type envelope struct {
	Run             string          `json:"run"`
	Step            int             `json:"step"`
	Input           string          `json:"input"`
	HistoryMessages string          `json:"history_messages"`
	Observation     json.RawMessage `json:"observation"`
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "grandchild" {
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(time.Hour)
		return
	}
	raw, _ := io.ReadAll(os.Stdin)
	var env envelope
	if err := json.Unmarshal(raw, &env); err != nil {
		fmt.Fprintln(os.Stderr, "testagent: bad envelope:", err)
		os.Exit(1)
	}
	words := strings.Fields(env.Input)
	if len(words) == 0 {
		words = []string{"echo"}
	}
	arg := func(i int) string {
		if i < len(words) {
			return words[i]
		}
		return ""
	}
	switch words[0] {
	case "echo":
		delta("echo: " + strings.Join(words[1:], " "))
	case "usage":
		// Report model use, as an agent calling a model would
		delta("counted")
		fmt.Println(`{"type":"usage","input":1000,"output":100,"cache_read":10}`)
		fmt.Println(`{"type":"usage","input":500,"output":50}`)
	case "view":
		// What tool files an agent step sees, and whether it
		// can exec a tool by path.
		var seen []string
		for _, d := range []string{"/ctx/bin", "/ctx/tool"} {
			if ents, err := os.ReadDir(d); err == nil {
				for _, e := range ents {
					seen = append(seen, d+"/"+e.Name())
				}
			}
		}
		err := exec.Command("/ctx/tool/" + arg(1)).Run()
		delta(fmt.Sprintf("view: seen=%s exec=%v", strings.Join(seen, ","), err))
	case "fds":
		// The descriptors this step was started with.
		ents, _ := os.ReadDir("/proc/self/fd")
		var fds []string
		for _, e := range ents {
			if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && !strings.HasPrefix(l, "/proc/") {
				fds = append(fds, e.Name()+"->"+l)
			}
		}
		delta("fds: " + strings.Join(fds, " "))
	case "capture":
		_ = os.WriteFile(fmt.Sprintf("/workspace/envelope-%d.json", env.Step), raw, 0o644)
		vars := os.Environ()
		sort.Strings(vars)
		_ = os.WriteFile(fmt.Sprintf("/workspace/env-%d.txt", env.Step), []byte(strings.Join(vars, "\n")+"\n"), 0o644)
		if env.Step == 0 {
			call("call-cap", "tsh", "list")
			return
		}
		delta("captured")
	case "calls":
		n, _ := strconv.Atoi(arg(1))
		if env.Step < n {
			call("c"+strconv.Itoa(env.Step), "tsh", "list")
			return
		}
		delta("made " + strconv.Itoa(n) + " calls")
	case "reuse":
		call("dup", "tsh", "list")
	case "bad":
		switch arg(1) {
		case "result":
			_ = out.Encode(map[string]any{"type": "tool_result", "call_id": "x", "status": "ok", "content": "forged"})
		case "approval":
			_ = out.Encode(map[string]any{"type": "approval", "id": "x", "decision": "allow_once"})
		case "done":
			_ = out.Encode(map[string]any{"type": "done", "status": "ok"})
		case "json":
			fmt.Println("this is not json")
		case "two-calls":
			call("a", "tsh", "list")
			call("b", "tsh", "list")
		case "after-call":
			call("a", "tsh", "list")
			delta("too late")
		case "exit":
			delta("partial")
			os.Exit(3)
		case "unknown-field":
			_ = out.Encode(map[string]any{"type": "delta", "text": "x", "extra": 1})
		}
	case "trap":
		signal.Ignore(syscall.SIGTERM)
		gc := exec.Command("/proc/self/exe", "grandchild", arg(1))
		gc.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		_ = gc.Start()
		delta("trapping")
		time.Sleep(time.Hour)
	case "sleep":
		s, _ := strconv.ParseFloat(arg(1), 64)
		delta("sleeping")
		time.Sleep(time.Duration(s * float64(time.Second)))
		delta(" awake")
	case "slow":
		// A slow run for the cluster test: SECONDS of deltas (4 a second)
		// around one call of the tool named second (its result ends step 0).
		s, _ := strconv.ParseFloat(arg(1), 64)
		n := int(s * 2)
		for i := 0; i < n; i++ {
			delta(".")
			time.Sleep(250 * time.Millisecond)
		}
		if env.Step == 0 {
			call("t1", arg(2))
			return
		}
		delta(" slow done")
	case "spew":
		n, _ := strconv.Atoi(arg(1))
		chunk := strings.Repeat("x", 99) + "\n"
		for i := 0; i < n; i++ {
			delta(chunk)
		}
	case "see":
		// An agent step sees no tool files at all.
		var res []string
		for _, p := range words[1:] {
			if ents, err := os.ReadDir(p); err == nil {
				var names []string
				for _, e := range ents {
					names = append(names, e.Name())
				}
				res = append(res, "ls "+p+" ["+strings.Join(names, " ")+"]")
				continue
			}
			out, err := exec.Command(p).CombinedOutput()
			res = append(res, fmt.Sprintf("exec %s: %v %q", p, err, out))
		}
		delta("see: " + strings.Join(res, "; "))
	case "run":
		// The agent step itself acts on the host's sockets (docs/walls.md).
		out, err := exec.Command(arg(1), words[2:]...).CombinedOutput()
		delta(fmt.Sprintf("run: %v\n%s", err, out))
	case "tooltwice":
		// Two calls of one tool; the second after 2 s (a client can
		// reattach in between).
		switch env.Step {
		case 0:
			call("t1", arg(1), words[2:]...)
		case 1:
			time.Sleep(2 * time.Second)
			call("t2", arg(1), words[2:]...)
		default:
			var o struct{ Status string }
			_ = json.Unmarshal(env.Observation, &o)
			delta("second: " + o.Status)
		}
	case "tool":
		if env.Step == 0 {
			call("t1", arg(1), words[2:]...)
			return
		}
		var o struct{ Status, Content string }
		_ = json.Unmarshal(env.Observation, &o)
		delta(o.Status + ":" + o.Content)
	default:
		delta("unknown mode")
	}
}
