package ipc

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/cortexfs/ctx/internal/layout"
)

func strp(s string) *string { return &s }

// TestParseRequestAccepts covers every op and the defaults of session and
// scope. spec: P2
func TestParseRequestAccepts(t *testing.T) {
	cases := []struct {
		name, line string
		want       Request
	}{
		{"ping", `{"op":"ping"}`, Request{Op: OpPing}},
		{"send defaults", `{"op":"send","id":"msg-1","input":"hello"}`,
			Request{Op: OpSend, ID: "msg-1", Session: "default", Scope: layout.ScopePrivate, Input: strp("hello")}},
		{"send P2 example", `{"op":"send","id":"msg-1","session":"default","scope":"private","cwd":"/workspace","input":"hello"}`,
			Request{Op: OpSend, ID: "msg-1", Session: "default", Scope: "private", Cwd: "/workspace", Input: strp("hello")}},
		{"send shared with workspace", `{"op":"send","id":"a.b:c-d_e","session":"s-1","scope":"shared","workspace":"/tmp/w","input":""}`,
			Request{Op: OpSend, ID: "a.b:c-d_e", Session: "s-1", Scope: "shared", Workspace: "/tmp/w", Input: strp("")}},
		{"tsh P2 example", `{"op":"tsh","id":"tool-1","session":"default","args":["load","bash"]}`,
			Request{Op: OpTsh, ID: "tool-1", Session: "default", Scope: "private", Args: []string{"load", "bash"}}},
		{"resume P2 example", `{"op":"resume","session":"default"}`,
			Request{Op: OpResume, Session: "default", Scope: "private"}},
		{"resume defaults", `{"op":"resume"}`, Request{Op: OpResume, Session: "default", Scope: "private"}},
		{"resume shared", `{"op":"resume","session":"x","scope":"shared"}`, Request{Op: OpResume, Session: "x", Scope: "shared"}},
		{"remove shared", `{"op":"remove","session":"x","scope":"shared"}`, Request{Op: OpRemove, Session: "x", Scope: "shared"}},
		// A bare run id: every session of the agent checks it (no default session).
		{"cancel P2 example", `{"op":"cancel","id":"run-1"}`, Request{Op: OpCancel, ID: "run-1"}},
		{"cancel in session", `{"op":"cancel","id":"run-1","session":"s"}`,
			Request{Op: OpCancel, ID: "run-1", Session: "s", Scope: "private"}},
		{"cancel active run of default", `{"op":"cancel"}`, Request{Op: OpCancel, Session: "default", Scope: "private"}},
		{"approve A2 example", `{"op":"approve","run":"run-1","id":"call-1","decision":"allow_once"}`,
			Request{Op: OpApprove, Run: "run-1", ID: "call-1", Decision: "allow_once"}},
		// The decision is judged by the waiting call, not the parser.
		{"approve odd decision", `{"op":"approve","run":"run-1","id":"call-1","decision":"maybe"}`,
			Request{Op: OpApprove, Run: "run-1", ID: "call-1", Decision: "maybe"}},
		{"surrounding whitespace", " \t{\"op\":\"ping\"}  ", Request{Op: OpPing}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRequest([]byte(tc.line))
			if err != nil {
				t.Fatalf("ParseRequest(%s): %v", tc.line, err)
			}
			if !reflect.DeepEqual(got, &tc.want) {
				t.Fatalf("ParseRequest(%s)\n got %+v\nwant %+v", tc.line, *got, tc.want)
			}
		})
	}
}

// TestParseRequestRefuses lists every refusal and its error class (and so
// its wire code). spec: P2
func TestParseRequestRefuses(t *testing.T) {
	cases := []struct {
		name, line string
		want       error
		code       string
	}{
		{"empty", ``, ErrBadRequest, CodeBadRequest},
		{"not json", `hello`, ErrBadRequest, CodeBadRequest},
		{"array", `[{"op":"ping"}]`, ErrBadRequest, CodeBadRequest},
		{"json null", `null`, ErrBadRequest, CodeBadRequest},
		{"invalid utf-8", "{\"op\":\"send\",\"id\":\"a\",\"input\":\"\xff\"}", ErrBadRequest, CodeBadRequest},
		{"trailing object", `{"op":"ping"}{"op":"ping"}`, ErrBadRequest, CodeBadRequest},
		{"trailing garbage", `{"op":"ping"} x`, ErrBadRequest, CodeBadRequest},
		{"unknown field", `{"op":"ping","bogus":1}`, ErrBadRequest, CodeBadRequest},
		{"typo field", `{"op":"send","id":"a","sesion":"x","input":"hi"}`, ErrBadRequest, CodeBadRequest},
		{"wrong type", `{"op":"send","id":"a","input":42}`, ErrBadRequest, CodeBadRequest},
		{"missing op", `{"id":"a"}`, ErrBadRequest, CodeBadRequest},
		{"unknown op", `{"op":"exec"}`, ErrBadRequest, CodeBadRequest},
		{"send no id", `{"op":"send","input":"hi"}`, ErrBadRequest, CodeBadRequest},
		{"send bad id", `{"op":"send","id":"-a","input":"hi"}`, ErrBadRequest, CodeBadRequest},
		{"send id with slash", `{"op":"send","id":"a/b","input":"hi"}`, ErrBadRequest, CodeBadRequest},
		{"send id too long", `{"op":"send","id":"` + strings.Repeat("a", 129) + `","input":"hi"}`, ErrBadRequest, CodeBadRequest},
		{"send no input", `{"op":"send","id":"a"}`, ErrBadRequest, CodeBadRequest},
		{"send null input", `{"op":"send","id":"a","input":null}`, ErrBadRequest, CodeBadRequest},
		{"send with args", `{"op":"send","id":"a","input":"x","args":["a"]}`, ErrBadRequest, CodeBadRequest},
		{"send with empty args", `{"op":"send","id":"a","input":"x","args":[]}`, ErrBadRequest, CodeBadRequest},
		{"send bad scope", `{"op":"send","id":"a","input":"x","scope":"public"}`, ErrBadRequest, CodeBadRequest},
		{"send bad session", `{"op":"send","id":"a","input":"x","session":"../etc"}`, layout.ErrBadName, CodeBadName},
		{"send relative workspace", `{"op":"send","id":"a","input":"x","workspace":"w"}`, ErrBadRequest, CodeBadRequest},
		{"send relative cwd", `{"op":"send","id":"a","input":"x","cwd":"sub/dir"}`, ErrBadRequest, CodeBadRequest},
		{"tsh no args", `{"op":"tsh","id":"a"}`, ErrBadRequest, CodeBadRequest},
		{"tsh empty args", `{"op":"tsh","id":"a","args":[]}`, ErrBadRequest, CodeBadRequest},
		{"tsh with input", `{"op":"tsh","id":"a","args":["x"],"input":"x"}`, ErrBadRequest, CodeBadRequest},
		{"tsh non-string args", `{"op":"tsh","id":"a","args":[1]}`, ErrBadRequest, CodeBadRequest},
		{"tsh no id", `{"op":"tsh","args":["x"]}`, ErrBadRequest, CodeBadRequest},
		{"resume bad session", `{"op":"resume","session":".hidden"}`, layout.ErrBadName, CodeBadName},
		{"remove the trash", `{"op":"remove","session":".trash"}`, layout.ErrBadName, CodeBadName},
		{"remove bad scope", `{"op":"remove","session":"x","scope":"all"}`, ErrBadRequest, CodeBadRequest},
		{"resume bad scope", `{"op":"resume","scope":"everyone"}`, ErrBadRequest, CodeBadRequest},
		{"cancel bad id", `{"op":"cancel","id":"run 1"}`, ErrBadRequest, CodeBadRequest},
		{"cancel bad session", `{"op":"cancel","id":"run-1","session":"a/b"}`, layout.ErrBadName, CodeBadName},
		{"approve no run", `{"op":"approve","id":"call-1","decision":"deny"}`, ErrBadRequest, CodeBadRequest},
		{"approve no id", `{"op":"approve","run":"run-1","decision":"deny"}`, ErrBadRequest, CodeBadRequest},
		// As strict as the envelope parser:
		{"duplicate key", `{"op":"ping","op":"send","id":"a","input":"x"}`, ErrBadRequest, CodeBadRequest},
		{"case-variant op", `{"op":"ping","OP":"send","id":"a","input":"x"}`, ErrBadRequest, CodeBadRequest},
		{"case-variant only", `{"OP":"ping"}`, ErrBadRequest, CodeBadRequest},
		{"case-variant field", `{"op":"send","id":"a","Input":"x"}`, ErrBadRequest, CodeBadRequest},
		{"duplicate id", `{"op":"send","id":"a","id":"b","input":"x"}`, ErrBadRequest, CodeBadRequest},
		{"duplicate args", `{"op":"tsh","id":"a","args":["list"],"args":["call","x"]}`, ErrBadRequest, CodeBadRequest},
		// An explicit empty session is a bad name, not "default":
		{"send empty session", `{"op":"send","id":"a","input":"x","session":""}`, layout.ErrBadName, CodeBadName},
		{"resume empty session", `{"op":"resume","session":""}`, layout.ErrBadName, CodeBadName},
		{"input over 512 KiB", `{"op":"send","id":"a","input":"` + strings.Repeat("x", MaxInput+1) + `"}`, ErrTooLarge, CodeTooLarge},
		{"line over 1 MiB", `{"op":"ping"}` + strings.Repeat(" ", MaxLine), ErrTooLarge, CodeTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(tc.line))
			if !errors.Is(err, tc.want) {
				t.Fatalf("want %v, got %+v, %v", tc.want, r, err)
			}
			if r != nil {
				t.Fatalf("a refused request must not be returned: %+v", r)
			}
			if c := Code(err); c != tc.code {
				t.Fatalf("Code = %q, want %q (%v)", c, tc.code, err)
			}
		})
	}
}

// TestParseRequestSizeLimits: an input of exactly 512 KiB is accepted, one
// byte more is too_large (and nothing is recorded: the parser refuses it
// before any session sees it); a line of exactly 1 MiB parses. spec: P2
func TestParseRequestSizeLimits(t *testing.T) {
	mk := func(n int) []byte {
		return []byte(`{"op":"send","id":"big","input":"` + strings.Repeat("é", n/2) + strings.Repeat("x", n%2) + `"}`)
	}
	r, err := ParseRequest(mk(MaxInput))
	if err != nil || len(*r.Input) != MaxInput {
		t.Fatalf("input of exactly %d bytes: %v", MaxInput, err)
	}
	if _, err := ParseRequest(mk(MaxInput + 1)); !errors.Is(err, ErrTooLarge) || Code(err) != CodeTooLarge {
		t.Fatalf("input of %d bytes: want too_large, got %v", MaxInput+1, err)
	}
	ping := `{"op":"ping"}`
	exact := []byte(ping + strings.Repeat(" ", MaxLine-len(ping)))
	if _, err := ParseRequest(exact); err != nil {
		t.Fatalf("line of exactly %d bytes: %v", MaxLine, err)
	}
	if _, err := ParseRequest(append(exact, ' ')); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("line of %d bytes: want ErrTooLarge, got %v", MaxLine+1, err)
	}
}

// TestDigest: the same payload has the same digest whatever the id; any
// payload change (input, args, session, scope, cwd, workspace, op) changes it. spec: P4
func TestDigest(t *testing.T) {
	parse := func(s string) *Request {
		t.Helper()
		r, err := ParseRequest([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	base := parse(`{"op":"send","id":"a","input":"hi"}`)
	if d := parse(`{"op":"send","id":"b","session":"default","scope":"private","input":"hi"}`).Digest(); d != base.Digest() {
		t.Fatalf("defaults or id changed the digest: %s vs %s", d, base.Digest())
	}
	for _, s := range []string{
		`{"op":"send","id":"a","input":"hi!"}`,
		`{"op":"send","id":"a","input":"hi","session":"other"}`,
		`{"op":"send","id":"a","input":"hi","scope":"shared"}`,
		`{"op":"send","id":"a","input":"hi","cwd":"/x"}`,
		`{"op":"send","id":"a","input":"hi","workspace":"/x"}`,
		`{"op":"send","id":"a","input":""}`,
		`{"op":"tsh","id":"a","args":["hi"]}`,
	} {
		if parse(s).Digest() == base.Digest() {
			t.Errorf("%s has the digest of the base request", s)
		}
	}
	// Args are part of a tsh request's payload.
	tsh := parse(`{"op":"tsh","id":"a","args":["call","x"]}`)
	for _, s := range []string{
		`{"op":"tsh","id":"a","args":["call","y"]}`,
		`{"op":"tsh","id":"a","args":["call"]}`,
		`{"op":"tsh","id":"a","args":["call","x",""]}`,
		`{"op":"tsh","id":"a","args":["callx"]}`,
	} {
		if parse(s).Digest() == tsh.Digest() {
			t.Errorf("%s has the digest of %s", s, `["call","x"]`)
		}
	}
	if !strings.HasPrefix(base.Digest(), "sha256:") {
		t.Fatalf("digest %q", base.Digest())
	}
}

// TestClassifyApproval: only a well-formed approve for the pending call
// yields allow_once or deny; everything else fails closed. spec: A2, A3
func TestClassifyApproval(t *testing.T) {
	cases := []struct{ name, line, want string }{
		{"allow_once", `{"op":"approve","run":"run-1","id":"call-1","decision":"allow_once"}`, "allow_once"},
		{"deny", `{"op":"approve","run":"run-1","id":"call-1","decision":"deny"}`, "deny"},
		{"mismatch run", `{"op":"approve","run":"run-2","id":"call-1","decision":"allow_once"}`, "mismatch"},
		{"mismatch id", `{"op":"approve","run":"run-1","id":"call-2","decision":"allow_once"}`, "mismatch"},
		{"malformed json", `{"op":"approve","run":"run-1",`, "malformed"},
		{"not json", `yes`, "malformed"},
		{"empty line", ``, "malformed"},
		{"a ping line", `{"op":"ping"}`, "malformed"},
		{"a send line", `{"op":"send","id":"call-1","input":"allow_once"}`, "malformed"},
		{"unknown decision", `{"op":"approve","run":"run-1","id":"call-1","decision":"allow_always"}`, "malformed"},
		{"missing decision", `{"op":"approve","run":"run-1","id":"call-1"}`, "malformed"},
		{"decision case", `{"op":"approve","run":"run-1","id":"call-1","decision":"ALLOW_ONCE"}`, "malformed"},
		{"unknown field", `{"op":"approve","run":"run-1","id":"call-1","decision":"allow_once","all":true}`, "malformed"},
		{"bad run id", `{"op":"approve","run":"","id":"call-1","decision":"allow_once"}`, "malformed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ClassifyApproval([]byte(tc.line), "run-1", "call-1"); got != tc.want {
				t.Fatalf("ClassifyApproval(%s) = %q, want %q", tc.line, got, tc.want)
			}
		})
	}
}

// TestCode maps each error class to its wire code in one place. spec: STYLE 11
func TestCode(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{ErrBadRequest, CodeBadRequest},
		{ErrTooLarge, CodeTooLarge},
		{layout.ErrBadName, CodeBadName},
		{layout.CheckName("session", "a/b"), CodeBadName},
		{errors.Join(errors.New("x"), ErrTooLarge), CodeTooLarge},
		{errors.New("plain"), CodeInternal},
		{WithCode(CodeBusy, errors.New("busy")), CodeBusy},
		{WithCode(CodeDenied, errors.New("no")), CodeDenied},
		{wrap(WithCode(CodeIDConflict, errors.New("reused"))), CodeIDConflict},
		{wrap(wrap(ErrBadRequest)), CodeBadRequest},
		// the code chosen where the error arose wins over a class it wraps
		{WithCode(CodeAgentFailed, layout.ErrBadName), CodeAgentFailed},
		{Errorf(CodeNotFound, "no active run %s", "r1"), CodeNotFound},
		// a machine out of a resource wins over any code
		{WithCode(CodeAgentFailed, fmt.Errorf("start: %w", syscall.EMFILE)), CodeResourceExhausted},
	}
	for _, tc := range cases {
		if got := Code(tc.err); got != tc.want {
			t.Errorf("Code(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
	ce := WithCode(CodeNotFound, ErrUnavailable)
	if !errors.Is(ce, ErrUnavailable) || ce.Error() != ErrUnavailable.Error() {
		t.Fatalf("CodedError must unwrap and keep the message: %v", ce)
	}
	f := ErrorFrame("run-1", WithCode(CodeLimitExceeded, errors.New("9 process starts")))
	if f.Type != TypeError || f.Run != "run-1" || f.Code != CodeLimitExceeded || f.Message != "9 process starts" {
		t.Fatalf("ErrorFrame: %+v", f)
	}
}

type wrapped struct{ err error }

func (w wrapped) Error() string { return "op: " + w.err.Error() }
func (w wrapped) Unwrap() error { return w.err }

func wrap(err error) error { return wrapped{err} }

// TestRequestKeysMatchFields: the strict key list is exactly Request's JSON
// field names, so a field added later cannot be silently refused or let
// through in another case.
func TestRequestKeysMatchFields(t *testing.T) {
	rt := reflect.TypeOf(Request{})
	var tags []string
	for i := 0; i < rt.NumField(); i++ {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		tags = append(tags, name)
	}
	if !reflect.DeepEqual(tags, requestKeys) {
		t.Fatalf("requestKeys %v != Request's json names %v", requestKeys, tags)
	}
}

// TestApprovalReason: a deny's reason is read (control characters but tab
// and newline dropped), bounded at MaxReason, and ignored on any other
// answer.
func TestApprovalReason(t *testing.T) {
	deny := `{"op":"approve","run":"run-1","id":"c1","decision":"deny","reason":"use \u001b[31mdate\ttool\nplease"}`
	if got := ApprovalReason([]byte(deny)); got != "use [31mdate\ttool\nplease" {
		t.Fatalf("reason %q", got)
	}
	if got := ApprovalReason([]byte(`{"op":"approve","run":"run-1","id":"c1","decision":"allow_once","reason":"x"}`)); got != "" {
		t.Fatalf("an allow's reason read: %q", got)
	}
	long := `{"op":"approve","run":"run-1","id":"c1","decision":"deny","reason":"` + strings.Repeat("x", MaxReason+1) + `"}`
	if _, err := ParseRequest([]byte(long)); err == nil {
		t.Fatal("a reason over MaxReason accepted")
	}
	if ClassifyApproval([]byte(long), "run-1", "c1") != "malformed" {
		t.Fatal("an over-long reason is not malformed")
	}
}

// TestParseRename: rename needs a session and exactly one valid new name.
func TestParseRename(t *testing.T) {
	for line, ok := range map[string]bool{
		`{"op":"rename","session":"a","args":["b"]}`:      true,
		`{"op":"rename","session":"a","args":[]}`:         false,
		`{"op":"rename","session":"a","args":["b","c"]}`:  false,
		`{"op":"rename","session":"a","args":["../x"]}`:   false,
		`{"op":"rename","args":["b"]}`:                    true, // the default session
		`{"op":"rename","session":"a","args":[".trash"]}`: false,
	} {
		if _, err := ParseRequest([]byte(line)); (err == nil) != ok {
			t.Errorf("%s: err %v, want ok=%v", line, err, ok)
		}
	}
}
