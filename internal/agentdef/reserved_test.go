package agentdef

import (
	"testing"

	"github.com/cortexfs/ctx/internal/layout"
)

// TestMountRefusesEveryReservedPath: an agent's .d/mount may not cover or
// replace any path the view owns nor the system it runs on — both lists
// live in internal/layout. spec: B2
func TestMountRefusesEveryReservedPath(t *testing.T) {
	src := t.TempDir()
	for _, r := range append(append([]string(nil), layout.ViewOwned...), layout.SystemDirs...) {
		for _, dst := range []string{r, r + "/x"} {
			if _, _, err := ParseMount([]byte("ro " + src + " " + dst + "\n")); err == nil {
				t.Errorf("mount at %s accepted", dst)
			}
		}
	}
	if _, _, err := ParseMount([]byte("ro " + src + " /data\n")); err != nil {
		t.Errorf("mount at /data refused: %v", err)
	}
}
