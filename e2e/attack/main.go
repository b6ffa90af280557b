// Command attack is a tool the security e2e tests (e2e/security_*_test.go)
// run inside a real run's sandbox. Each subcommand tries one attack on the
// host and prints what happened as KEY=VALUE lines; the tests then check
// the host, never only this output. Subcommands live one concern a file and
// register themselves in init.
package main

import (
	"fmt"
	"os"
	"sort"
)

// attacks maps a subcommand to its function; it returns the exit status.
var attacks = map[string]func(args []string) int{}

func register(name string, f func(args []string) int) {
	if _, dup := attacks[name]; dup {
		panic("attack: duplicate subcommand " + name)
	}
	attacks[name] = f
}

func main() {
	if len(os.Args) < 2 {
		names := make([]string, 0, len(attacks))
		for n := range attacks {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: attack SUBCOMMAND [ARGS...]; subcommands: %v\n", names)
		os.Exit(2)
	}
	f, ok := attacks[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "attack: unknown subcommand %q\n", os.Args[1])
		os.Exit(2)
	}
	os.Exit(f(os.Args[2:]))
}

// say prints one KEY=VALUE line.
func say(key string, value any) { fmt.Printf("%s=%v\n", key, value) }
