// Package ctlsock serves the run capability / control socket (runtime.md
// U1–U5, interfaces.md "Control socket"), through which an agent replaces its
// own system.md or prompt.template.md, and provides the client the
// agent.update tool uses.
package ctlsock

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"unicode/utf8"
)

// Limits of the wire protocol.
const (
	// MaxFrame bounds one request line (JSON escaping can grow 8 KiB of
	// content sixfold).
	MaxFrame = 64 << 10
	// MaxContent is the largest content accepted (U4).
	MaxContent = 8 << 10
	// OpAgentUpdate is the only operation.
	OpAgentUpdate = "agent.update"
)

// Errno values of an answer (interfaces.md "Control socket"), plus EIO for
// a host-side failure (the ledger or the file could not be written).
const (
	EALREADY = "EALREADY"
	EPERM    = "EPERM"
	EINVAL   = "EINVAL"
	E2BIG    = "E2BIG"
	EIO      = "EIO"
)

// ToolName is the tool object the daemon installs as tool/agent.update.
const ToolName = "agent.update"

// ToolJSON is the content of tool/agent.update.d/tool.json (the same text as
// cmd/agent.update/tool.json).
const ToolJSON = `{"description":"Replace this agent's own system.md or prompt.template.md (takes effect next run)"}` + "\n"

// Controls are the control files an agent may replace (U4).
var Controls = []string{"system.md", "prompt.template.md"}

// Request is the U1 frame.
type Request struct {
	Op        string `json:"op"`
	RequestID string `json:"request_id"`
	Agent     string `json:"agent"`
	Session   string `json:"session"`
	Run       string `json:"run"`
	Control   string `json:"control"`
	// Content is sent byte for byte: EncodeRequest does not replace invalid
	// UTF-8, so the host, not the client, judges it (U4).
	Content string `json:"content"`
	// Token is the legacy bearer field: it parses and is ignored (U2).
	Token string `json:"token,omitempty"`
}

// Response is the answer: {"ok":true} or {"ok":false,"errno":...,"message":...}.
type Response struct {
	OK      bool   `json:"ok"`
	Errno   string `json:"errno,omitempty"`
	Message string `json:"message,omitempty"`
}

// EncodeRequest renders req as one JSON line. Unlike encoding/json it keeps
// invalid UTF-8 in Content as raw bytes, so that the host can refuse it.
func EncodeRequest(req Request) []byte {
	head := struct {
		Op        string `json:"op"`
		RequestID string `json:"request_id"`
		Agent     string `json:"agent"`
		Session   string `json:"session"`
		Run       string `json:"run"`
		Control   string `json:"control"`
		Token     string `json:"token,omitempty"`
	}{req.Op, req.RequestID, req.Agent, req.Session, req.Run, req.Control, req.Token}
	b, _ := json.Marshal(head) // strings only: cannot fail
	var buf bytes.Buffer
	buf.Write(b[:len(b)-1])
	buf.WriteString(`,"content":"`)
	for i := 0; i < len(req.Content); i++ {
		c := req.Content[i]
		switch {
		case c == '"' || c == '\\':
			buf.WriteByte('\\')
			buf.WriteByte(c)
		case c == '\n':
			buf.WriteString(`\n`)
		case c == '\t':
			buf.WriteString(`\t`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&buf, `\u%04x`, c)
		default:
			buf.WriteByte(c)
		}
	}
	buf.WriteString("\"}\n")
	return buf.Bytes()
}

// Call sends req on the control socket at path and returns the answer.
// An answer with OK false is not an error.
func Call(ctx context.Context, path string, req Request) (Response, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return Response{}, fmt.Errorf("control socket: %w", err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	// A peer refused before its frame is read (wrong uid) finds the
	// answer already waiting: read it even when the send failed.
	_, werr := c.Write(EncodeRequest(req))
	line, err := bufio.NewReader(c).ReadBytes('\n')
	if err != nil && len(line) == 0 {
		if werr != nil {
			return Response{}, fmt.Errorf("control socket: send: %w", werr)
		}
		return Response{}, fmt.Errorf("control socket: no answer: %w", err)
	}
	var resp Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return Response{}, fmt.Errorf("control socket: bad answer %q: %w", line, err)
	}
	return resp, nil
}

// errStrictString is returned by decodeStrictString for content that is not
// UTF-8 text.
var errStrictString = errors.New("not valid UTF-8")

// decodeStrictString unquotes a JSON string, refusing what encoding/json
// would silently turn into U+FFFD: raw invalid UTF-8 and unpaired \uD800–
// \uDFFF escapes. spec: U4
func decodeStrictString(raw []byte) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", err
	}
	if !utf8.Valid(raw) {
		return "", errStrictString
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++
		if i >= len(raw) || raw[i] != 'u' {
			continue
		}
		hi, ok := hex4(raw, i+1)
		i += 4
		if !ok {
			return "", errStrictString
		}
		switch {
		case hi >= 0xDC00 && hi <= 0xDFFF:
			return "", errStrictString
		case hi >= 0xD800 && hi <= 0xDBFF:
			if i+2 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
				return "", errStrictString
			}
			lo, ok := hex4(raw, i+3)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return "", errStrictString
			}
			i += 6
		}
	}
	return s, nil
}

func hex4(b []byte, at int) (uint64, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[at:at+4]), 16, 16)
	return v, err == nil
}
