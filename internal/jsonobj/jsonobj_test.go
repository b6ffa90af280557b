package jsonobj

import (
	"errors"
	"testing"
)

func TestKeys(t *testing.T) {
	for _, tc := range []struct {
		in   string
		keys int
		ok   bool
	}{
		{`{}`, 0, true},
		{`{"a":1,"b":[1,{"a":2,"a":3}]}`, 2, true}, // nested duplicates are the nested parser's business
		{`{"a":1,"a":2}`, 0, false},
		{`{"a":1,"A":2}`, 2, true}, // distinct exact keys; Only refuses the variant
		{`[1]`, 0, false},
		{`"x"`, 0, false},
		{`{"a":1} {}`, 0, false},
		{`{"a":1}x`, 0, false},
		{`{"a":}`, 0, false},
		{`{"a":1`, 0, false},
		{``, 0, false},
	} {
		m, err := Keys([]byte(tc.in))
		if (err == nil) != tc.ok {
			t.Errorf("Keys(%s) err = %v, want ok=%v", tc.in, err, tc.ok)
			continue
		}
		if err != nil && !errors.Is(err, ErrNotObject) {
			t.Errorf("Keys(%s): %v does not wrap ErrNotObject", tc.in, err)
		}
		if tc.ok && len(m) != tc.keys {
			t.Errorf("Keys(%s) = %d keys, want %d", tc.in, len(m), tc.keys)
		}
	}
}

func TestOnlyAndHasExactly(t *testing.T) {
	m, _ := Keys([]byte(`{"op":"ping","OP":"send"}`))
	if err := Only(m, "op", "id"); err == nil {
		t.Error("a case variant of a known key was accepted")
	}
	m, _ = Keys([]byte(`{"op":"ping","idd":"x"}`))
	if err := Only(m, "op", "id"); err == nil {
		t.Error("an unknown key was accepted")
	}
	m, _ = Keys([]byte(`{"op":"ping","id":"x"}`))
	if err := Only(m, "op", "id", "session"); err != nil {
		t.Errorf("known keys refused: %v", err)
	}
	if !HasExactly(m, "id", "op") || HasExactly(m, "op") || HasExactly(m, "op", "session") {
		t.Error("HasExactly disagrees with the keys present")
	}
}

func FuzzKeys(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"a":2}`, `{"op":"ping","OP":"send"}`, `{"a":{"b":[1,2]}}`, `[`, `{"a":1}{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Keys(b)
		if err != nil {
			return
		}
		for k := range m {
			if _, err := Keys([]byte(`{` + quote(k) + `:1,` + quote(k) + `:2}`)); err == nil {
				t.Fatalf("duplicate %q accepted", k)
			}
		}
	})
}

func quote(s string) string {
	b := []byte{'"'}
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20:
			b = append(b, []byte(`\u00`)...)
			b = append(b, "0123456789abcdef"[r>>4], "0123456789abcdef"[r&15])
		default:
			b = append(b, string(r)...)
		}
	}
	return string(append(b, '"'))
}
