//go:build !ctxfault

package ctxd

// faultHook is nil in normal builds: no fault can be injected.
func faultHook() func(string) { return nil }
