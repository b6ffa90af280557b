// Package jsonobj reads one JSON object strictly: its members by their exact
// keys, a duplicate key, a non-object or trailing data being an error.
// encoding/json alone matches struct fields case-insensitively and keeps the
// last of two duplicates, so `{"op":"ping","OP":"send"}` would decode as a
// send; every parser of untrusted JSON objects (socket requests, envelopes,
// agent output) checks its keys here first.
package jsonobj

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrNotObject is wrapped by every error of Keys.
var ErrNotObject = errors.New("not a strict JSON object")

// Keys parses b as exactly one JSON object and returns its members by their
// exact (case-sensitive) keys. A duplicate key, a non-object or trailing
// data is an error.
func Keys(b []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object: %w", ErrNotObject)
	}
	m := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%v: %w", err, ErrNotObject)
		}
		k, ok := t.(string)
		if !ok {
			return nil, fmt.Errorf("object key %v is not a string: %w", t, ErrNotObject)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("value of %q: %v: %w", k, err, ErrNotObject)
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("duplicate key %q: %w", k, ErrNotObject)
		}
		m[k] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, fmt.Errorf("%v: %w", err, ErrNotObject)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data: %w", ErrNotObject)
	}
	return m, nil
}

// HasExactly reports whether m has exactly the keys want.
func HasExactly(m map[string]json.RawMessage, want ...string) bool {
	if len(m) != len(want) {
		return false
	}
	for _, k := range want {
		if _, ok := m[k]; !ok {
			return false
		}
	}
	return true
}

// Only checks that every key of m is one of allowed, spelled exactly; it
// names the first key that is not (a case variant of an allowed key is
// named as such).
func Only(m map[string]json.RawMessage, allowed ...string) error {
	ok := make(map[string]bool, len(allowed))
	for _, a := range allowed {
		ok[a] = true
	}
	for k := range m {
		if ok[k] {
			continue
		}
		for _, a := range allowed {
			if bytes.EqualFold([]byte(k), []byte(a)) {
				return fmt.Errorf("key %q differs from %q only in case: %w", k, a, ErrNotObject)
			}
		}
		return fmt.Errorf("unknown key %q: %w", k, ErrNotObject)
	}
	return nil
}
