// Package systemd holds the systemd user units of the ctx daemon (ctx.socket
// and ctx.service) and renders them for an installed ctx binary.
package systemd

import (
	"bytes"
	"embed"
	"fmt"
	"path/filepath"
	"strings"
)

//go:embed ctx.socket ctx.service
var files embed.FS

// Names are the unit files, in install order.
var Names = []string{"ctx.socket", "ctx.service"}

// DefaultExec is the ExecStart binary the shipped ctx.service names.
const DefaultExec = "%h/.local/bin/ctx"

// Render returns unit name with ExecStart pointing at bin (an absolute path;
// "" keeps DefaultExec) and, for ctx.service, one Environment= line per
// entry of env ("KEY=VALUE", e.g. CTX_ROOT) after ExecStart.
func Render(name, bin string, env []string) ([]byte, error) {
	b, err := files.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("unit %s: %w", name, err)
	}
	if name != "ctx.service" {
		return b, nil
	}
	if bin != "" {
		if !filepath.IsAbs(bin) || strings.ContainsAny(bin, " \t\n\\\"'%$") {
			return nil, fmt.Errorf("unit %s: ctx path %q: want an absolute path without spaces, quotes, %% or $", name, bin)
		}
		b = bytes.Replace(b, []byte("ExecStart="+DefaultExec+" daemon"), []byte("ExecStart="+bin+" daemon"), 1)
	}
	if len(env) > 0 {
		var lines strings.Builder
		for _, kv := range env {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" || strings.ContainsAny(kv, "\n\"\\%$") {
				return nil, fmt.Errorf("unit %s: environment %q: want KEY=VALUE without quotes, %%, $ or backslashes", name, kv)
			}
			fmt.Fprintf(&lines, "Environment=\"%s=%s\"\n", k, v)
		}
		i := bytes.Index(b, []byte("ExecStart="))
		j := i + bytes.IndexByte(b[i:], '\n') + 1
		b = append(b[:j:j], append([]byte(lines.String()), b[j:]...)...)
	}
	return b, nil
}
