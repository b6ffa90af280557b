package runprep

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cortexfs/ctx/internal/store"
	"github.com/cortexfs/ctx/internal/toolctx"
)

// History converts the session's raw conversation into prompt history, the
// one conversion the run and `ctx agent prompt` share (R4): user and
// assistant messages carry their text, tool results their normalized
// content; error conclusions are not part of the history.
func History(msgs []store.Message) []Message {
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		switch m.Role {
		case "user":
			out = append(out, Message{Role: m.Role, Content: m.Text, Images: m.Images})
		case "assistant":
			out = append(out, Message{Role: m.Role, Content: m.Text})
		case "tool":
			out = append(out, Message{Role: "tool", Content: m.Content})
		}
	}
	return out
}

// ReadHistory reads the session's messages.jsonl and returns its History. A
// missing session or file is an empty history; a torn last line (no LF yet)
// is ignored, as the store does.
func ReadHistory(sessionDir string) ([]Message, error) {
	b, err := os.ReadFile(filepath.Join(sessionDir, store.MessagesFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	if i := bytes.LastIndexByte(b, '\n'); i+1 < len(b) {
		b = b[:i+1]
	}
	var msgs []store.Message
	for n := 1; len(b) > 0; n++ {
		i := bytes.IndexByte(b, '\n')
		line := b[:i]
		b = b[i+1:]
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var m store.Message
		if err := json.Unmarshal(line, &m); err != nil {
			return nil, fmt.Errorf("history: %s:%d: %w", store.MessagesFile, n, err)
		}
		msgs = append(msgs, m)
	}
	return History(msgs), nil
}

// ToolState reads the session's tsh state (tools.json), the input the
// prompt renders the tool context from (Input.ToolState). A missing file is
// the empty state.
func ToolState(sessionDir string) (*toolctx.State, error) {
	st, err := toolctx.ReadState(filepath.Join(sessionDir, toolctx.StateFileName))
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// ToolContext is the session's tool context text: tsh's tools.json rendered
// by toolctx.ContextText within toolctx.DefaultContextBudget — exactly what `tsh
// context` prints and the envelope carries (K5). A missing file is "".
func ToolContext(sessionDir string) (string, error) {
	st, err := toolctx.ReadState(filepath.Join(sessionDir, toolctx.StateFileName))
	if err != nil {
		return "", err
	}
	return toolctx.ContextText(st, toolctx.DefaultContextBudget), nil
}
