package run

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/cortexfs/ctx/internal/imageblob"
	"github.com/cortexfs/ctx/internal/prompt"
	"github.com/cortexfs/ctx/internal/provider"
	"github.com/cortexfs/ctx/ipc"
)

var png1 = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00")

// An acp-v1 agent gets image blocks only when it advertises
// promptCapabilities.image; otherwise the run ends with a clear error.
func TestACPPromptImages(t *testing.T) {
	sess := t.TempDir()
	sum, err := imageblob.Put(sess, png1)
	if err != nil {
		t.Fatal(err)
	}
	ims := []ipc.Image{{SHA256: sum, MediaType: ipc.MediaPNG, Name: "shot.png", Size: int64(len(png1))}}
	blocks, err := acpPrompt("look", nil, sess, "a", acp.PromptCapabilities{})
	if err != nil || len(blocks) != 1 || blocks[0].Text == nil {
		t.Fatalf("no images: %v %+v", err, blocks)
	}
	if _, err := acpPrompt("look", ims, sess, "claude", acp.PromptCapabilities{}); !errors.Is(err, errNoImages) || !strings.Contains(err.Error(), "claude") {
		t.Fatalf("without the capability: %v", err)
	}
	blocks, err = acpPrompt("look", ims, sess, "a", acp.PromptCapabilities{Image: true})
	if err != nil || len(blocks) != 2 || blocks[1].Image == nil {
		t.Fatalf("with the capability: %v %+v", err, blocks)
	}
	if blocks[1].Image.Data != base64.StdEncoding.EncodeToString(png1) || blocks[1].Image.MimeType != ipc.MediaPNG {
		t.Fatalf("image block %+v", blocks[1].Image)
	}
	ims[0].SHA256 = strings.Repeat("0", 64)
	if _, err := acpPrompt("look", ims, sess, "a", acp.PromptCapabilities{Image: true}); !errors.Is(err, imageblob.ErrBlob) || !strings.Contains(err.Error(), "shot.png") {
		t.Fatalf("missing blob: %v", err)
	}
}

// A model request carries a user message's images read from the blob
// store; a missing one fails the request, naming it.
func TestRequestLoadsImages(t *testing.T) {
	sess := t.TempDir()
	sum, err := imageblob.Put(sess, png1)
	if err != nil {
		t.Fatal(err)
	}
	im := ipc.Image{SHA256: sum, MediaType: ipc.MediaJPEG, Name: "shot.png", Size: int64(len(png1))}
	msgs := []prompt.Message{{Role: "system", Content: "s"}, {Role: "user", Content: "look", Images: []ipc.Image{im}}}
	req, err := request(msgs, imageLoader(sess))
	if err != nil {
		t.Fatal(err)
	}
	want := provider.Image{MediaType: ipc.MediaPNG, Data: png1} // sniffed, not the client's jpeg
	if len(req.Messages) != 1 || len(req.Messages[0].Images) != 1 || req.Messages[0].Images[0].MediaType != want.MediaType || string(req.Messages[0].Images[0].Data) != string(png1) {
		t.Fatalf("request %+v", req.Messages)
	}
	im.SHA256 = strings.Repeat("1", 64)
	msgs[1].Images = []ipc.Image{im}
	if _, err := request(msgs, imageLoader(sess)); !errors.Is(err, imageblob.ErrBlob) || !strings.Contains(err.Error(), "shot.png") {
		t.Fatalf("missing blob: %v", err)
	}
}
