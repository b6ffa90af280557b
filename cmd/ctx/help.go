package main

import (
	_ "embed"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// helpWrap is the widest help kong writes: the top-level listing is
// the same text on every terminal at least this wide and on a pipe.
const helpWrap = 80

// bakedHelp is what `ctx --help` prints at helpWrap columns, as kong
// renders it from the whole model (TestBakedHelpIsKongs keeps it so:
// `go test ./cmd/ctx -run TestBakedHelpIsKongs -update`). Building that
// model — every command's flags and interpolated help — was most of the
// listing's start, for a text that only changes with the CLI.
//
//go:embed help.txt
var bakedHelp string

// bakedHelpServes says whether the baked text is exactly what kong would
// print for args on a stdout width columns wide.
func bakedHelpServes(args []string, width int) bool {
	return len(args) == 1 && (args[0] == "--help" || args[0] == "-h") && width >= helpWrap
}

// helpWidth is the width kong wraps help for on f: $COLUMNS when set and
// a number, else the terminal's columns, else 80 (kong's guessWidth).
func helpWidth(f *os.File) int {
	if c := os.Getenv("COLUMNS"); c != "" {
		if n, err := strconv.Atoi(c); err == nil {
			return n
		}
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 {
		return 80
	}
	return int(ws.Col)
}
