package cli

import (
	"fmt"
	"os"

	"golang.org/x/term"

	"github.com/cortexfs/ctx/internal/chatview"
	"github.com/cortexfs/ctx/internal/prices"
	"github.com/cortexfs/ctx/ipc"
)

// Rendered output. `send` and `chat` render for a
// person only when stdout is a terminal, NO_COLOR is unset or empty (see
// no-color.org) and TERM is not "dumb"; `--json` always prints the raw
// frames. Otherwise the output is exactly the plain one.

// prettyOut reports whether output to env.Stdout is rendered, and the
// terminal's width.
func prettyOut(env *Env) (ok bool, width int) {
	f, isFile := env.Stdout.(*os.File)
	if !isFile || !term.IsTerminal(int(f.Fd())) || os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false, 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil || width <= 0 {
		width = 80
	}
	return true, width
}

// newView makes the run renderer for env.Stdout; crlf for a raw-mode
// terminal. A price table that does not parse is reported once on
// stderr and no cost is shown.
func newView(env *Env, width int, crlf bool) (*chatview.View, error) {
	table, err := prices.Load(prices.Path(env.Layout))
	if err != nil {
		fmt.Fprintf(env.Stderr, "ctx: %v (no cost is shown)\n", err)
		table = nil
	}
	var cost func(*ipc.Frame) string
	if table != nil {
		cost = func(f *ipc.Frame) string {
			if f.Usage == nil || len(f.UsageByModel) == 0 {
				return ""
			}
			by := map[string]map[string]int64{}
			for m, u := range f.UsageByModel {
				if u != nil {
					by[m] = map[string]int64{"input": u.Input, "output": u.Output, "cache_read": u.CacheRead, "cache_write": u.CacheWrite}
				}
			}
			if usd, ok := table.CostByModel(by); ok {
				return prices.Format(usd)
			}
			return ""
		}
	}
	return chatview.New(env.Stdout, chatview.Options{Width: width, CRLF: crlf, Cost: cost})
}
