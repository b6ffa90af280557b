package provider

import (
	"strings"
	"testing"
)

// A user message's images become the providers' own image blocks, the
// bytes base64-encoded, after the message's text.
func TestEncodeImages(t *testing.T) {
	req := Request{Model: "m", Messages: []Message{
		{Role: RoleUser, Text: "what is this", Images: []Image{{MediaType: "image/png", Data: []byte("\x89PNG\r\n\x1a\nxy")}}},
		{Role: RoleAssistant, Text: "a png"},
		{Role: RoleUser, Text: "plain"},
	}}
	a := NewAnthropic(ProviderConfig{Name: "anthropic", BaseURL: "http://127.0.0.1:1", MaxTokens: 100})
	defer a.CloseIdleConnections()
	body, err := a.encode(req)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":[{"type":"text","text":"what is this"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgp4eQ=="}}]},{"role":"assistant","content":[{"type":"text","text":"a png"}]},{"role":"user","content":[{"type":"text","text":"plain"}]}],"stream":true}`
	if string(body) != want {
		t.Errorf("anthropic body\n got %s\nwant %s", body, want)
	}

	o := NewOpenAI(ProviderConfig{Name: "openai", BaseURL: "http://127.0.0.1:1", MaxTokens: 100})
	defer o.CloseIdleConnections()
	body, err = o.encode(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{
		`{"role":"user","content":[{"type":"text","text":"what is this"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgp4eQ=="}}]}`,
		`{"role":"user","content":"plain"}`, // a message without images is sent as before
	} {
		if !strings.Contains(string(body), part) {
			t.Errorf("openai body %s\nlacks %s", body, part)
		}
	}
}
