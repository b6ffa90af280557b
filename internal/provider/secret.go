package provider

import (
	"fmt"
	"io"
	"log/slog"
)

// Secret holds a credential. Every way of printing, formatting, marshalling or
// logging it yields "[REDACTED]"; only Reveal returns the value, and only the
// code that sets an HTTP header calls it. The value sits behind a pointer so
// that even reflection-based printing of an unexported field shows an address,
// never the key. spec: B4, D9
type Secret struct{ v *string }

const redacted = "[REDACTED]"

// NewSecret wraps s; an empty s gives the zero Secret.
func NewSecret(s string) Secret {
	if s == "" {
		return Secret{}
	}
	return Secret{v: &s}
}

// Reveal returns the credential. Call it only to set a request header.
func (s Secret) Reveal() string {
	if s.v == nil {
		return ""
	}
	return *s.v
}

// IsZero reports whether no credential is held.
func (s Secret) IsZero() bool { return s.v == nil }

func (s Secret) String() string {
	if s.v == nil {
		return "[UNSET]"
	}
	return redacted
}

// GoString redacts %#v.
func (s Secret) GoString() string { return "provider.Secret(" + s.String() + ")" }

// Format redacts every verb, including %d and %x, which would otherwise
// bypass String.
func (s Secret) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, s.GoString())
		return
	}
	_, _ = io.WriteString(f, s.String())
}

// MarshalJSON redacts JSON encoding.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.String() + `"`), nil }

// MarshalText redacts text encoding (slog text handler, YAML, ...).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// LogValue redacts slog output.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

var (
	_ fmt.Formatter  = Secret{}
	_ fmt.GoStringer = Secret{}
	_ slog.LogValuer = Secret{}
)
