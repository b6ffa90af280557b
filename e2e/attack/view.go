package main

import (
	"os"
	"os/exec"
	"strings"
)

// view: list the tool files this sandbox shows and try
// to run the named ones directly, without tsh or the host's checks.
// Usage: attack view TOOL...
func init() {
	register("view", func(args []string) int {
		var seen []string
		for _, d := range []string{"/ctx/tool"} {
			ents, _ := os.ReadDir(d)
			for _, e := range ents {
				seen = append(seen, e.Name())
			}
		}
		say("tools", strings.Join(seen, ","))
		for _, t := range args {
			out, err := exec.Command("/ctx/tool/" + t).CombinedOutput()
			if err != nil {
				say("exec_"+t, "refused: "+err.Error())
			} else {
				say("exec_"+t, "ran: "+strings.TrimSpace(string(out)))
			}
		}
		return 0
	})
}
