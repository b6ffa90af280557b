package ipc

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/internal/layout"
)

// FuzzParseRequest: the request parser never panics, refuses only with
// its three error classes, and what it accepts survives a re-marshal: the
// parsed value is a fixed point. spec: P2
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"op":"ping"}`,
		`{"op":"send","id":"msg-1","session":"default","scope":"private","cwd":"/workspace","input":"hello"}`,
		`{"op":"send","id":"m","workspace":"/tmp/w","input":"\u00e9\ud83d\ude00<&>"}`,
		`{"op":"tsh","id":"tool-1","session":"default","args":["load","bash"]}`,
		`{"op":"resume","session":"default"}`,
		`{"op":"resume","scope":"shared"}`,
		`{"op":"cancel","id":"run-1"}`,
		`{"op":"cancel"}`,
		`{"op":"approve","run":"run-1","id":"call-1","decision":"allow_once"}`,
		`{"op":"approve","run":"run-1","id":"call-1","decision":"deny"}`,
		`{"op":"send","id":"m","input":"\udc00"}`,
		`{"op":"send","id":"m"}`,
		`{"op":"send","id":"m","input":"look","images":[{"sha256":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","media_type":"image/png","name":"shot.png","size":1}]}`,
		`{"op":"send","id":"m","input":"x","images":[{"sha256":"AA","media_type":"image/svg+xml","name":"../x","size":0,"data":"x"}]}`,
		`{"op":"send","id":"m","input":"x","images":[{"sha256":"a","sha256":"b"}]}`,
		`{"op":"tsh","id":"m","args":["list"],"images":[]}`,
		`{"op":"send","id":"m","input":"x","args":[]}`,
		`{"op":"tsh","id":"m","args":[]}`,
		`{"op":"send","id":"m","input":"x","session":"../x"}`,
		`{"op":"send","id":"m","input":"x","scope":"public"}`,
		`{"op":"send","id":"m","input":"x","cwd":"rel"}`,
		`{"op":"ping","x":1}`,
		`{"op":"ping"}{"op":"ping"}`,
		`{"OP":"ping"}`,
		`{"op":"ping","op":"send"}`,
		`{"op":"ping","OP":"send","id":"a","input":"x"}`,
		`{"op":"send","id":"a","input":"x","Input":"y"}`,
		`{"op":"tsh","id":"a","args":["list"],"args":["call","x"]}`,
		`{"op":"send","id":"a","input":"x","session":""}`,
		`{"op":`,
		`[]`,
		`null`,
		"\xff",
		``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := ParseRequest(line)
		if err != nil {
			if r != nil {
				t.Fatalf("request and error: %+v %v", r, err)
			}
			if !errors.Is(err, ErrBadRequest) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, layout.ErrBadName) {
				t.Fatalf("error of no class: %v", err)
			}
			return
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
		again := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
		if len(again) > MaxLine {
			return // escaping control characters can grow a line past the limit
		}
		r2, err := ParseRequest(again)
		if err != nil {
			t.Fatalf("re-marshalled %s: %v", again, err)
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("not a fixed point:\n%+v\n%+v", r, r2)
		}
		if r.Op == OpSend || r.Op == OpTsh || r.Op == OpResume {
			if r.Session == "" || (r.Scope != layout.ScopePrivate && r.Scope != layout.ScopeShared) {
				t.Fatalf("defaults not applied: %+v", r)
			}
		}
		if r.Op == OpSend && len(*r.Input) > MaxInput {
			t.Fatalf("input of %d bytes accepted", len(*r.Input))
		}
		if strings.ContainsRune(r.Session, '/') {
			t.Fatalf("session %q can escape its directory", r.Session)
		}
	})
}
