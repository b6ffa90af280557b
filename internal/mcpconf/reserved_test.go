package mcpconf

import (
	"testing"

	"github.com/cortexfs/ctx/internal/layout"
)

// TestBindReservedIsTheViewsList: an MCP server's bind may not cover a
// path the view owns (layout.ViewOwned, the list .d/mount is checked
// against too) but may place a package under the system directories.
// spec: B2
func TestBindReservedIsTheViewsList(t *testing.T) {
	for _, r := range layout.ViewOwned {
		for _, p := range []string{r, r + "/x"} {
			if CheckBind(p) == nil {
				t.Errorf("bind at %s accepted", p)
			}
		}
	}
	for _, ok := range []string{"/usr/lib/node_modules/x", "/opt/tool"} {
		if err := CheckBind(ok); err != nil {
			t.Errorf("bind at %s refused: %v", ok, err)
		}
	}
}
