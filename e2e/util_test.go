package e2e

import (
	"os/exec"
	"path/filepath"
	"strconv"
)

func itoa(i int) string          { return strconv.Itoa(i) }
func atoi(s string) (int, error) { return strconv.Atoi(s) }

// execCmd runs a program with the world's environment and the test
// binaries first on PATH.
func execCmd(w *world, prog string, args ...string) *exec.Cmd {
	p, _ := filepath.Abs(prog)
	cmd := exec.Command(p, args...)
	env := w.env()
	env[0] = "PATH=" + binDir + ":/usr/local/bin:/usr/bin:/bin"
	cmd.Env = env
	return cmd
}
