// Package version holds ctx's version, reported by the daemon's ping and
// by the client, in a package light enough for both binaries.
package version

// Version of ctx, reported by ping.
const Version = "0.1.0"
