//go:build !ctxfault

package cli

// faultHook is nil in normal builds: no fault can be injected.
func faultHook() func(string) { return nil }
