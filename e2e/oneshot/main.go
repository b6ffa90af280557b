// Command oneshot is the smallest client of an agent's socket: one send
// (the message its arguments make, the workspace its cwd), the answer's
// text printed, exit at done — what `ctx agent send` does, with nothing
// else in the binary. BenchmarkSendCLIVsClient measures ctx against it.
//
//	oneshot SOCKET SESSION WORD...
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: oneshot SOCKET SESSION WORD...")
		os.Exit(2)
	}
	c, err := net.Dial("unix", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "oneshot:", err)
		os.Exit(3)
	}
	wd, _ := os.Getwd()
	req, _ := json.Marshal(map[string]any{"op": "send", "id": "oneshot-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		"session": os.Args[2], "input": strings.Join(os.Args[3:], " "), "workspace": wd})
	if _, err := c.Write(append(req, '\n')); err != nil {
		fmt.Fprintln(os.Stderr, "oneshot:", err)
		os.Exit(3)
	}
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var f struct{ Type, Text, Status string }
		if json.Unmarshal(sc.Bytes(), &f) != nil {
			continue
		}
		switch f.Type {
		case "delta":
			os.Stdout.WriteString(f.Text)
		case "done":
			os.Stdout.WriteString("\n")
			if f.Status != "ok" {
				os.Exit(1)
			}
			return
		}
	}
	fmt.Fprintln(os.Stderr, "oneshot: connection closed before done")
	os.Exit(3)
}
