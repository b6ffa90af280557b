// Package policy parses agent and tool policy files and decides whether an
// agent may call a tool (runtime.md V1–V3).
//
// # Grammar
//
// A policy file is UTF-8 text of at most 64 KiB, read line by line (LF; a CR
// is an error). Each line is one of:
//
//	                     blank (empty or only spaces and tabs)
//	# comment            a '#' as the first non-blank character
//	allow tool NAME      agent policy only: NAME is a tool name or '*'
//	deny tool NAME       agent policy only
//	allow label LABEL    tool policy only: LABEL is an agent label or '*'
//	deny label LABEL     tool policy only
//
// Words are separated by spaces or tabs; a line has exactly three words.
// NAME and LABEL match [A-Za-z0-9][A-Za-z0-9._-]{0,63}; '*' matches every
// tool, or every agent including one without a label. In a tool rule, NAME
// may also be an MCP tool SERVER.TOOL (SERVER a server name, TOOL up to 128
// of [A-Za-z0-9._-]) or SERVER.* — every tool of that MCP server.
// There is no other wildcard, no expansion, no trailing comment.
//
// # Meaning
//
// The agent policy (agent/<name>.d/policy) says which tools the agent may
// call; the tool policy (tool/<name>.d/policy, beside the tool object) says
// which agent labels (agent/<name>.d/label) may call the tool.
//
//   - An absent file allows everything: no agent policy = every tool, no
//     tool policy = every label. The filesystem layers still apply.
//   - A present file allows only what it names: if no rule matches, the call
//     is denied. An empty file (or only comments) denies everything.
//   - Deny wins: a matching deny refuses even when an allow also matches.
//   - An unknown directive, a rule of the wrong kind for the file, a bad
//     name, a wrong word count, a CR, a NUL, invalid UTF-8 or a file over
//     64 KiB makes the whole file invalid: the error names file:line and
//     every call that consults the file fails closed.
//   - The effective decision is the intersection: both files must allow.
package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/cortexfs/ctx/internal/fileerr"
	"github.com/cortexfs/ctx/internal/ident"

	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/internal/safefs"
)

// MaxSize bounds a policy file.
const MaxSize = 64 << 10

// Kind says which file a policy came from; it decides which rules are legal.
type Kind int

const (
	// AgentPolicy is agent/<name>.d/policy: tool rules.
	AgentPolicy Kind = iota
	// ToolPolicy is tool/<name>.d/policy: label rules.
	ToolPolicy
)

func (k Kind) String() string {
	if k == ToolPolicy {
		return "tool-policy"
	}
	return "agent-policy"
}

// Decision layers.
const (
	LayerAgent = "agent-policy"
	LayerTool  = "tool-policy"
)

// ErrInvalid is wrapped by every parse error.
var ErrInvalid = errors.New("invalid policy")

// ParseError names the file and line that made a policy invalid.
type ParseError = fileerr.Error

// Rule is one allow or deny line.
type Rule struct {
	Allow   bool
	Subject string // "tool" or "label"
	Pattern string // a name or "*"
	Line    int
}

func (r Rule) String() string {
	verb := "deny"
	if r.Allow {
		verb = "allow"
	}
	return verb + " " + r.Subject + " " + r.Pattern
}

// Policy is a parsed policy file. A nil *Policy is an absent file.
type Policy struct {
	Kind  Kind
	File  string
	Rules []Rule
}

// Parse parses data read from file (file is only used in errors).
func Parse(kind Kind, file string, data []byte) (*Policy, error) {
	bad := func(line int, format string, a ...any) (*Policy, error) {
		return nil, &ParseError{File: file, Line: line, Msg: fmt.Sprintf(format, a...), Kind: ErrInvalid}
	}
	if len(data) > MaxSize {
		return bad(0, "over %d bytes", MaxSize)
	}
	p := &Policy{Kind: kind, File: file}
	want := "tool"
	if kind == ToolPolicy {
		want = "label"
	}
	lines := bytes.Split(data, []byte("\n"))
	if len(lines) > 0 && len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1] // the final LF ends the last line
	}
	for i, raw := range lines {
		n := i + 1
		if !utf8.Valid(raw) {
			return bad(n, "invalid UTF-8")
		}
		if bytes.IndexByte(raw, '\r') >= 0 {
			return bad(n, "carriage return (use LF line endings)")
		}
		if bytes.IndexByte(raw, 0) >= 0 {
			return bad(n, "NUL byte")
		}
		line := strings.Trim(string(raw), " \t")
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' })
		var r Rule
		switch f[0] {
		case "allow":
			r.Allow = true
		case "deny":
		default:
			return bad(n, "unknown directive %q (want allow or deny)", f[0])
		}
		if len(f) != 3 {
			return bad(n, "want %q: %d words", f[0]+" "+want+" NAME", len(f))
		}
		switch f[1] {
		case want:
		case "tool", "label":
			return bad(n, "%q rules do not belong in a %s file (agent policy: tool rules; tool policy: label rules)", f[1], kind)
		default:
			return bad(n, "unknown subject %q (want %s)", f[1], want)
		}
		if f[2] != "*" {
			if err := checkPattern(f[1], f[2]); err != nil {
				return bad(n, "%v", err)
			}
		}
		r.Subject, r.Pattern, r.Line = f[1], f[2], n
		p.Rules = append(p.Rules, r)
	}
	return p, nil
}

// Load reads and parses a policy file. An absent file is (nil, nil); any other
// failure to read it is an error (the caller fails closed). The final
// component is opened without following a symlink.
func Load(kind Kind, path string) (*Policy, error) {
	f, _, err := safefs.OpenRegular(path)
	if err != nil {
		return nil, loadErr(kind, path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", kind, path, err)
	}
	return Parse(kind, path, data)
}

// LoadAt is Load of rel below the directory descriptor dirfd (path names
// the same file in errors and rules): for a caller deciding for many tools
// of one directory.
func LoadAt(kind Kind, dirfd int, rel, path string) (*Policy, error) {
	data, err := safefs.ReadRegularAt(dirfd, rel, path, MaxSize+1)
	if err != nil {
		return nil, loadErr(kind, path, err)
	}
	return Parse(kind, path, data)
}

// loadErr is Load's answer to an open that failed: an absent file is no
// policy (nil, nil); anything else fails.
func loadErr(kind Kind, path string, err error) error {
	if errors.Is(err, safefs.ErrNotRegular) {
		return &ParseError{File: path, Msg: "not a regular file", Kind: ErrInvalid}
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("%s %s: %w", kind, path, err)
}

// Match applies p to subject (a tool name or an agent label, "" for no label).
// A nil p (absent file) allows. Deny wins; no match denies.
func (p *Policy) Match(subject string) (allowed bool, reason string) {
	if p == nil {
		return true, "no policy file"
	}
	var allow *Rule
	for i := range p.Rules {
		r := &p.Rules[i]
		if !r.matches(subject) {
			continue
		}
		if !r.Allow {
			return false, fmt.Sprintf("%s:%d: %s", p.File, r.Line, r)
		}
		if allow == nil {
			allow = r
		}
	}
	if allow != nil {
		return true, fmt.Sprintf("%s:%d: %s", p.File, allow.Line, allow)
	}
	what := "tool " + subject
	if p.Kind == ToolPolicy {
		what = "label " + subject
		if subject == "" {
			what = "an agent without a label"
		}
	}
	return false, fmt.Sprintf("%s: no rule allows %s", p.File, what)
}

// Decision is the policy verdict for one call. Layer names the refusing
// layer ("agent-policy" or "tool-policy"); it is empty when Allowed.
type Decision struct {
	Allowed bool
	Layer   string
	Reason  string
}

// Decide intersects the agent policy (tool rules) and the tool policy (label
// rules) for a call of toolName by an agent labelled agentLabel ("" for no
// label). A nil policy is an absent file. The agent policy is consulted first.
func Decide(agentPolicy, toolPolicy *Policy, toolName, agentLabel string) Decision {
	if ok, why := agentPolicy.Match(toolName); !ok {
		return Decision{Layer: LayerAgent, Reason: why}
	}
	if ok, why := toolPolicy.Match(agentLabel); !ok {
		return Decision{Layer: LayerTool, Reason: why}
	}
	return Decision{Allowed: true, Reason: "allowed by agent and tool policy"}
}

// DecideFiles loads both files and decides. A file that cannot be read or
// parsed fails closed: the decision refuses with that file's layer and the
// error (which names file:line) as the reason. Empty paths are absent files.
func DecideFiles(agentPolicyPath, toolPolicyPath, toolName, agentLabel string) Decision {
	var ap, tp *Policy
	var aerr, terr error
	if agentPolicyPath != "" {
		ap, aerr = Load(AgentPolicy, agentPolicyPath)
	}
	if toolPolicyPath != "" {
		tp, terr = Load(ToolPolicy, toolPolicyPath)
	}
	return DecideLoaded(ap, aerr, tp, terr, toolName, agentLabel)
}

// DecideLoaded is DecideFiles with both files already loaded (Load's
// results): an error fails closed, the agent's layer first.
func DecideLoaded(agentPolicy *Policy, agentErr error, toolPolicy *Policy, toolErr error, toolName, agentLabel string) Decision {
	if agentErr != nil {
		return Decision{Layer: LayerAgent, Reason: "invalid policy, failing closed: " + agentErr.Error()}
	}
	if toolErr != nil {
		return Decision{Layer: LayerTool, Reason: "invalid policy, failing closed: " + toolErr.Error()}
	}
	return Decide(agentPolicy, toolPolicy, toolName, agentLabel)
}

// mcpToolFirst, mcpToolRest: an MCP tool name (the part after SERVER.).
var mcpToolFirst, mcpToolRest = ident.NewClass("A-Za-z0-9_"), ident.NewClass("A-Za-z0-9._-") // [A-Za-z0-9_][A-Za-z0-9._-]{0,127}

// mcpServerFirst, mcpServerRest: an MCP server name (internal/mcpconf.CheckName).
var mcpServerFirst, mcpServerRest = ident.NewClass("A-Za-z0-9"), ident.NewClass("A-Za-z0-9_-") // [A-Za-z0-9][A-Za-z0-9_-]{0,31}

// checkPattern validates a rule's NAME or LABEL other than '*'. A tool rule
// also takes SERVER.TOOL and SERVER.*.
func checkPattern(subject, p string) error {
	err := layout.CheckName(subject, p)
	if err == nil || subject != "tool" {
		return err
	}
	if server, tool, ok := strings.Cut(p, "."); ok && ident.Valid(server, mcpServerFirst, mcpServerRest, 31) && (tool == "*" || ident.Valid(tool, mcpToolFirst, mcpToolRest, 127)) {
		return nil
	}
	return fmt.Errorf("%w (or SERVER.TOOL, SERVER.* for an MCP server's tools)", err)
}

// matches says whether the rule's pattern covers subject: '*' everything,
// SERVER.* every SERVER.TOOL, any other pattern only itself.
func (r *Rule) matches(subject string) bool {
	switch {
	case r.Pattern == "*":
		return true
	case strings.HasSuffix(r.Pattern, ".*"):
		server := strings.TrimSuffix(r.Pattern, "*")
		return strings.HasPrefix(subject, server) && len(subject) > len(server)
	}
	return r.Pattern == subject
}
