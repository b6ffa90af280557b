package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/cortexfs/ctx/internal/jsonobj"
)

// MaxOutputLine bounds one line of agent output.
const MaxOutputLine = 1 << 20

// ErrInvalidOutput is wrapped by every X9 violation.
var ErrInvalidOutput = errors.New("invalid agent output")

// Line is one parsed agent output line.
type Line struct {
	Type  string   // delta | tool_call | usage
	Text  string   // delta
	ID    string   // tool_call
	Name  string   // tool_call
	Args  []string // tool_call
	Usage *Usage   // usage
}

// Usage is what an agent reports it spent on a model (optional;
// nothing is made up when it is absent). Counts are tokens.
type Usage struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheRead  int64 `json:"cache_read"`
	CacheWrite int64 `json:"cache_write"`
}

// maxUsage bounds one reported count (a typo is not a trillion tokens).
const maxUsage = 1 << 40

// ParseLine parses one line of agent stdout (without its newline). Only
// {"type":"delta","text":...}, {"type":"tool_call","id":...,"name":...,"args":[...]}
// and {"type":"usage","input":N,"output":N[,"cache_read":N][,"cache_write":N]}
// are valid; anything else — result, approval, done or lifecycle frames,
// unknown fields, malformed JSON — is invalid output (X9).
func ParseLine(b []byte) (*Line, error) {
	bad := func(f string, a ...any) (*Line, error) {
		return nil, fmt.Errorf(f+": %w", append(a, ErrInvalidOutput)...)
	}
	if len(b) > MaxOutputLine {
		return bad("line of %d bytes exceeds %d", len(b), MaxOutputLine)
	}
	if !utf8.Valid(b) {
		return bad("line is not valid UTF-8")
	}
	m, err := jsonobj.Keys(b)
	if err != nil {
		return bad("not one JSON object of distinct keys: %v: %.200q", err, b)
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(m["type"], &head.Type); m["type"] == nil || err != nil {
		head.Type = ""
	}
	if (head.Type == "delta" && !jsonobj.HasExactly(m, "type", "text")) ||
		(head.Type == "tool_call" && !jsonobj.HasExactly(m, "type", "id", "name", "args")) {
		return bad("%s must have exactly its documented keys", head.Type)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	switch head.Type {
	case "delta":
		var d struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if err := dec.Decode(&d); err != nil || d.Text == nil {
			return bad("delta must be exactly {type, text}")
		}
		return &Line{Type: "delta", Text: *d.Text}, nil
	case "tool_call":
		var c struct {
			Type string    `json:"type"`
			ID   string    `json:"id"`
			Name string    `json:"name"`
			Args *[]string `json:"args"`
		}
		if err := dec.Decode(&c); err != nil || c.Args == nil || c.ID == "" || c.Name == "" {
			return bad("tool_call must be exactly {type, id, name, args: [strings]}")
		}
		if len(c.ID) > 128 || len(c.Name) > 64 {
			return bad("tool_call id or name too long")
		}
		return &Line{Type: "tool_call", ID: c.ID, Name: c.Name, Args: *c.Args}, nil
	case "usage":
		var u struct {
			Type       string `json:"type"`
			Input      *int64 `json:"input"`
			Output     *int64 `json:"output"`
			CacheRead  int64  `json:"cache_read"`
			CacheWrite int64  `json:"cache_write"`
		}
		if err := dec.Decode(&u); err != nil || u.Input == nil || u.Output == nil {
			return bad("usage must be {type, input, output[, cache_read][, cache_write]} with whole numbers")
		}
		for _, n := range []int64{*u.Input, *u.Output, u.CacheRead, u.CacheWrite} {
			if n < 0 || n > maxUsage {
				return bad("usage counts must be from 0 to %d", int64(maxUsage))
			}
		}
		return &Line{Type: "usage", Usage: &Usage{Input: *u.Input, Output: *u.Output, CacheRead: u.CacheRead, CacheWrite: u.CacheWrite}}, nil
	case "":
		return bad("line has no type")
	default:
		// Only the host writes results, approvals and lifecycle frames (X7, A3).
		return bad("agents may not emit %q frames", head.Type)
	}
}
