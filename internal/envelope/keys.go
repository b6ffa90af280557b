package envelope

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// objectKeys parses b as exactly one JSON object and returns its members by
// their exact (case-sensitive) keys. A duplicate key, a non-object or
// trailing data is an error: encoding/json alone matches keys
// case-insensitively and keeps the last duplicate.
func objectKeys(b []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	m := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("duplicate key %q", k)
		}
		m[k] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data")
	}
	return m, nil
}

// hasExactly reports whether m has exactly the keys want.
func hasExactly(m map[string]json.RawMessage, want ...string) bool {
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
