// Command tsh is the agent's tool shell; see package tsh.
package main

import (
	"fmt"
	"os"

	"github.com/cortexfs/ctx/tsh"
)

func main() {
	tsh.InitTerminal() // as PID 1 of the terminal's sandbox
	sh, err := tsh.New()
	if err != nil {
		fmt.Fprintf(os.Stderr, "tsh: %v\n", err)
		os.Exit(tsh.ExitError)
	}
	os.Exit(sh.Run(os.Args[1:]))
}
