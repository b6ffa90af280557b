package ipc

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/cortexfs/ctx/internal/ident"

	"github.com/cortexfs/ctx/internal/jsonobj"
	"github.com/cortexfs/ctx/internal/layout"
)

// Limits of the request protocol (interfaces.md "Socket frames").
const (
	MaxLine  = 1 << 20   // a request line, without its newline
	MaxInput = 512 << 10 // a send's input

	// What the daemon writes is bounded too, so every client can read it:
	// a delta's text is at most MaxDeltaText bytes (a longer one is split
	// into several deltas), an assistant conclusion keeps at most
	// MaxAssistantText bytes of the reply (with a warning when cut; the
	// deltas carry all of it), and so no frame line, JSON-escaped, comes
	// near MaxFrameLine — the bound clients and log readers read with.
	MaxDeltaText     = 1 << 20
	MaxAssistantText = 1 << 20
	MaxFrameLine     = 8 << 20
)

// Request is one P2 request line.
type Request struct {
	Op        string   `json:"op"`
	ID        string   `json:"id,omitempty"`
	Session   string   `json:"session,omitempty"`
	Scope     string   `json:"scope,omitempty"`
	Cwd       string   `json:"cwd,omitempty"`
	Workspace string   `json:"workspace,omitempty"`
	Input     *string  `json:"input,omitempty"`
	Args      []string `json:"args,omitempty"`
	Run       string   `json:"run,omitempty"`
	Decision  string   `json:"decision,omitempty"`
	// Reason is a deny's reason (approve only): the person's words, which
	// reach the model as the call's result.
	Reason string `json:"reason,omitempty"`
	// Images are the images a send's message attaches, by reference: the
	// bytes are in the session's blob store (see Image).
	Images []Image `json:"images,omitempty"`
}

// requestKeys are the JSON names of Request's fields, exactly as spelled.
var requestKeys = []string{"op", "id", "session", "scope", "cwd", "workspace", "input", "args", "run", "decision", "reason", "images"}

// Request ops.
const (
	OpPing    = "ping"
	OpSend    = "send"
	OpTsh     = "tsh"
	OpResume  = "resume"
	OpCancel  = "cancel"
	OpApprove = "approve"
	// OpRemove removes an idle session's files: the
	// session's actor closes its log and archives-then-deletes the
	// directory; a session with an active or waiting run answers busy.
	OpRemove = "remove"
	// OpRename gives an idle session another name (args: [NEW]): its
	// actor closes its log and renames the directory, never over another.
	OpRename = "rename"
)

// Approval decisions a client may send; the host adds timeout, eof, malformed, mismatch.
const (
	DecisionAllowOnce = "allow_once"
	DecisionDeny      = "deny"
)

var idFirst, idRest = ident.NewClass("A-Za-z0-9"), ident.NewClass("A-Za-z0-9._:-") // [A-Za-z0-9][A-Za-z0-9._:-]{0,127}

// ErrBadRequest and ErrTooLarge classify parse failures.
var (
	ErrBadRequest = errors.New("bad request")
	ErrTooLarge   = errors.New("too large")
)

// CheckID validates a request, run or call id.
func CheckID(what, id string) error {
	if !ident.Valid(id, idFirst, idRest, 127) {
		return fmt.Errorf("%s %q: must match [A-Za-z0-9][A-Za-z0-9._:-]{0,127}: %w", what, id, ErrBadRequest)
	}
	return nil
}

// ParseRequest decodes and validates one request line (without its newline).
// Unknown fields are refused so a typo never silently becomes a default.
// It checks syntax only; whether a workspace exists is the daemon's check.
func ParseRequest(line []byte) (*Request, error) {
	if len(line) > MaxLine {
		return nil, fmt.Errorf("request line of %d bytes exceeds %d: %w", len(line), MaxLine, ErrTooLarge)
	}
	if !utf8.Valid(line) {
		return nil, fmt.Errorf("request is not valid UTF-8: %w", ErrBadRequest)
	}
	// As strict as the envelope parser — a duplicate key or
	// one that differs from a field only in case is refused (encoding/json
	// alone would match "OP" to op and keep the last duplicate).
	keys, err := jsonobj.Keys(line)
	if err != nil {
		return nil, fmt.Errorf("request: %v: %w", err, ErrBadRequest)
	}
	if err := jsonobj.Only(keys, requestKeys...); err != nil {
		return nil, fmt.Errorf("request: %v: %w", err, ErrBadRequest)
	}
	if raw, ok := keys["images"]; ok {
		if err := checkImageKeys(raw); err != nil {
			return nil, fmt.Errorf("request: images: %v: %w", err, ErrBadRequest)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var r Request
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("request is not a JSON object of known fields: %v: %w", err, ErrBadRequest)
	}
	if _, ok := keys["session"]; ok && r.Session == "" {
		// An explicit empty name is a bad name, not "default".
		return nil, layout.CheckName("session", r.Session)
	}
	bad := func(format string, a ...any) (*Request, error) {
		return nil, fmt.Errorf(format+": %w", append(a, ErrBadRequest)...)
	}
	session := func() error {
		if r.Session == "" {
			r.Session = "default"
		}
		if err := layout.CheckName("session", r.Session); err != nil {
			return err // wraps layout.ErrBadName: code bad_name
		}
		switch r.Scope {
		case "":
			r.Scope = layout.ScopePrivate
		case layout.ScopePrivate, layout.ScopeShared:
		default:
			return fmt.Errorf("scope %q: must be private or shared: %w", r.Scope, ErrBadRequest)
		}
		return nil
	}
	if r.Images != nil && r.Op != OpSend {
		return bad("only send takes images")
	}
	if len(r.Images) == 0 {
		r.Images = nil // "images":[] is no images (and the same digest)
	}
	switch r.Op {
	case OpPing:
	case OpSend, OpTsh:
		if err := CheckID("id", r.ID); err != nil {
			return nil, err
		}
		if err := session(); err != nil {
			return nil, err
		}
		if r.Workspace != "" && !filepath.IsAbs(r.Workspace) {
			return bad("workspace %q: not an absolute path", r.Workspace)
		}
		if r.Cwd != "" && !filepath.IsAbs(r.Cwd) {
			return bad("cwd %q: not an absolute path", r.Cwd)
		}
		if r.Op == OpSend {
			if r.Input == nil {
				return bad("send needs input")
			}
			if len(*r.Input) > MaxInput {
				return nil, fmt.Errorf("input of %d bytes exceeds %d: %w", len(*r.Input), MaxInput, ErrTooLarge)
			}
			if r.Args != nil {
				return bad("send takes no args")
			}
			if err := CheckImages(r.Images); err != nil {
				return nil, err
			}
		} else {
			if len(r.Args) == 0 {
				return bad("tsh needs args")
			}
			if r.Input != nil {
				return bad("tsh takes no input")
			}
		}
	case OpResume, OpRemove:
		if err := session(); err != nil {
			return nil, err
		}
	case OpRename:
		if err := session(); err != nil {
			return nil, err
		}
		if len(r.Args) != 1 {
			return bad("rename: args must hold the new name")
		}
		if err := layout.CheckName("session", r.Args[0]); err != nil {
			return nil, err
		}
	case OpCancel:
		if r.ID != "" {
			if err := CheckID("run", r.ID); err != nil {
				return nil, err
			}
		}
		if r.Session != "" || r.ID == "" {
			if err := session(); err != nil {
				return nil, err
			}
		}
	case OpApprove:
		if err := CheckID("run", r.Run); err != nil {
			return nil, err
		}
		if err := CheckID("id", r.ID); err != nil {
			return nil, err
		}
		// The decision itself is judged by the waiting call (a bad one is "malformed").
		if len(r.Reason) > MaxReason {
			return bad("reason of %d bytes exceeds %d", len(r.Reason), MaxReason)
		}
	case "":
		return bad("missing op")
	default:
		return bad("unknown op %q", r.Op)
	}
	return &r, nil
}

// Digest identifies a send or tsh request's payload, so a reused id with a
// different payload is refused (id_conflict) while an identical one replays.
func (r *Request) Digest() string {
	h := sha256.New()
	j, _ := json.Marshal(struct {
		Op, Session, Scope, Cwd, Workspace string
		Input                              *string
		Args                               []string
	}{r.Op, r.Session, r.Scope, r.Cwd, r.Workspace, r.Input, r.Args})
	h.Write(j)
	if len(r.Images) > 0 {
		// Only when there are images, so the digest of a send without
		// any is what it always was (stored request ids replay).
		j, _ = json.Marshal(r.Images)
		h.Write(j)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))[:32]
}

// MaxReason bounds a deny's reason.
const MaxReason = 1 << 10

// ApprovalReason is the reason of a well-formed deny line ("" for any
// other line), as the model will read it: control characters but tab
// and newline dropped.
func ApprovalReason(line []byte) string {
	r, err := ParseRequest(line)
	if err != nil || r.Op != OpApprove || r.Decision != DecisionDeny {
		return ""
	}
	return strings.Map(func(c rune) rune {
		if c < 0x20 && c != '\t' && c != '\n' || c == 0x7f {
			return -1
		}
		return c
	}, r.Reason)
}

// ClassifyApproval turns the one line read after an approval_request into a
// decision (A3): allow_once or deny when it is a well-formed approve for the
// pending call; mismatch when it names another run or call; malformed otherwise.
func ClassifyApproval(line []byte, run, id string) string {
	r, err := ParseRequest(line)
	if err != nil || r.Op != OpApprove {
		return "malformed"
	}
	if r.Run != run || r.ID != id {
		return "mismatch"
	}
	switch r.Decision {
	case DecisionAllowOnce, DecisionDeny:
		return r.Decision
	}
	return "malformed"
}
