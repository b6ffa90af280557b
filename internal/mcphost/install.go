package mcphost

import (
	"github.com/cortexfs/ctx/internal/mcpinstall"
)

// The install resolution lives in internal/mcpinstall (the ctx client
// links it without the runtime); these names keep mcphost's callers.
type (
	// Resolver is mcpinstall.Resolver.
	Resolver = mcpinstall.Resolver
)

// ErrDownload is mcpinstall.ErrDownload.
var ErrDownload = mcpinstall.ErrDownload

// DefaultResolver is mcpinstall.DefaultResolver.
func DefaultResolver() Resolver { return mcpinstall.DefaultResolver() }
