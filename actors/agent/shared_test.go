package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/ipc"
)

type prefixes []string

func (p prefixes) WorkspaceShared(path string) bool {
	for _, x := range p {
		if path == x || strings.HasPrefix(path, x+"/") {
			return true
		}
	}
	return false
}

// A cluster node refuses a workspace outside the shared prefixes with
// workspace_not_shared; the single daemon (no cluster) never does
// (interfaces.md "Cluster (phase 1)").
func TestCheckShared(t *testing.T) {
	shared := prefixes{"/srv/work"}
	for _, tc := range []struct {
		name    string
		cluster prefixes
		ws      string
		refused bool
	}{
		{"single daemon", nil, "/home/u/p", false},
		{"under a prefix", shared, "/srv/work/p", false},
		{"the prefix itself", shared, "/srv/work", false},
		{"a sibling with the same start", shared, "/srv/workers/p", true},
		{"outside", shared, "/home/u/p", true},
		{"no workspace", shared, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &ipc.Request{Op: ipc.OpSend, Workspace: tc.ws}
			var err error
			if tc.cluster == nil {
				err = checkShared(nil, r)
			} else {
				err = checkShared(tc.cluster, r)
			}
			if tc.refused != (err != nil) || tc.refused && ipc.Code(err) != ipc.CodeWorkspaceNotShared {
				t.Fatalf("checkShared(%q) = %v (code %q)", tc.ws, err, ipc.Code(err))
			}
		})
	}
}

func (prefixes) Own(context.Context, string, string, string, bool) (int64, string, string, error) {
	return 0, "", "", nil
}

func (prefixes) Release(context.Context, string, string, string, int64) {}

func (prefixes) Forward(context.Context, string, string, *ipc.Request, *ipc.Conn) {}

func (prefixes) Owning() error { return nil }
