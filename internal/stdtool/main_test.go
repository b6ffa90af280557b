package stdtool

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine behind: a
// tool call's helpers (the process-group ender of bash, fetch's
// connections) belong to the call.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
