package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when any goroutine they started is
// still running at the end: every goroutine has an owner that stops it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
