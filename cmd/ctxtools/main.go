// Command ctxtools is ctx's standard toolset in one binary: it runs the
// tool named by the base name of argv[0] (bash, read, write, edit,
// apply_patch, grep, glob, ls, fetch), as `ctx init` installs it in
// CTX_ROOT/tool/. `ctxtools NAME ARGS…` runs NAME too; `ctxtools` alone
// lists the tools, `ctxtools --meta` prints their tool.json texts. See internal/stdtool.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/cortexfs/ctx/internal/stdtool"
)

func main() {
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	if name == "ctxtools" {
		if len(args) == 1 && args[0] == "--meta" {
			// what `ctx init` installs: every tool's name and tool.json
			os.Stdout.Write(stdtool.MetaList())
			return
		}
		if len(args) == 0 {
			for _, t := range stdtool.Tools() {
				fmt.Println(t.Usage)
			}
			return
		}
		name, args = args[0], args[1:]
	}
	// SIGTERM (the runtime's cancel of a bash call) cancels the context:
	// a tool ends what it started, then exits.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := stdtool.Main(ctx, name, args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
