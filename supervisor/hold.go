package supervisor

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// holdTimeout bounds how long the daemon tries to release a started
// terminal (the FIFO reader appears once the unit's ctxterm runs).
const holdTimeout = 10 * time.Second

// writeEnvFile writes env (K=V) as a systemd EnvironmentFile at path,
// owner-only (0600), replacing what is there: the terminal's environment
// reaches its unit through it, never through ExecStart or systemd-run's
// command line, which every local user reads. A value systemd would
// rewrite (quotes, backslashes, a line break, a leading space) is refused.
// spec: B3
func writeEnvFile(path string, env []string) error {
	var b strings.Builder
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if strings.ContainsAny(kv, "\"'\\\n\r") || strings.TrimSpace(v) != v || k == "" {
			return fmt.Errorf("environment file: %s: a value systemd would not keep as it is", k)
		}
		b.WriteString(kv + "\n")
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("environment file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("environment file: %w", err)
	}
	_, err = f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("environment file %s: %w", path, err)
	}
	return nil
}
