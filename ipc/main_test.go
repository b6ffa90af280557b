package ipc

import (
	"testing"

	"go.uber.org/goleak"
)

// Conn starts a writer goroutine per connection and Listen/Dial use real
// sockets: every test must leave none behind (STYLE habit 13).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
