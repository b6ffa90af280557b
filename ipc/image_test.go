package ipc

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

const hexA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// TestParseRequestImages: a send's image references are decoded as sent
// and every malformed one is a bad_request naming what is wrong.
func TestParseRequestImages(t *testing.T) {
	line := `{"op":"send","id":"m","input":"look","images":[{"sha256":"` + hexA + `","media_type":"image/png","name":"shot.png","size":123}]}`
	got, err := ParseRequest([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := []Image{{SHA256: hexA, MediaType: MediaPNG, Name: "shot.png", Size: 123}}
	if !reflect.DeepEqual(got.Images, want) {
		t.Fatalf("images = %+v, want %+v", got.Images, want)
	}
	img := func(fields string) string {
		return `{"op":"send","id":"m","input":"x","images":[` + fields + `]}`
	}
	ok := `"sha256":"` + hexA + `","media_type":"image/png","name":"a.png","size":1`
	nine := strings.Repeat(`{`+ok+`},`, 8) + `{` + ok + `}`
	cases := []struct{ name, line, says string }{
		{"nine images", `{"op":"send","id":"m","input":"x","images":[` + nine + `]}`, "at most 8"},
		{"upper hex", img(`{"sha256":"` + strings.ToUpper(hexA) + `","media_type":"image/png","name":"a.png","size":1}`), "lowercase hex"},
		{"short hex", img(`{"sha256":"abc","media_type":"image/png","name":"a.png","size":1}`), "64 lowercase"},
		{"not hex", img(`{"sha256":"` + strings.Repeat("g", 64) + `","media_type":"image/png","name":"a.png","size":1}`), "hex"},
		{"svg", img(`{"sha256":"` + hexA + `","media_type":"image/svg+xml","name":"a.svg","size":1}`), "media_type"},
		{"no media type", img(`{"sha256":"` + hexA + `","name":"a.png","size":1}`), "media_type"},
		{"slash in name", img(`{"sha256":"` + hexA + `","media_type":"image/png","name":"../a.png","size":1}`), "basename"},
		{"dotdot name", img(`{"sha256":"` + hexA + `","media_type":"image/png","name":"..","size":1}`), "file name"},
		{"empty name", img(`{"sha256":"` + hexA + `","media_type":"image/png","name":"","size":1}`), "file name"},
		{"control in name", img(`{"sha256":"` + hexA + `","media_type":"image/png","name":"a\u001b[2J.png","size":1}`), "control"},
		{"long name", img(`{"sha256":"` + hexA + `","media_type":"image/png","name":"` + strings.Repeat("n", 256) + `","size":1}`), "at most 255"},
		{"zero size", img(`{"sha256":"` + hexA + `","media_type":"image/png","name":"a.png","size":0}`), "size"},
		{"over 5 MiB", img(`{"sha256":"` + hexA + `","media_type":"image/png","name":"a.png","size":5242881}`), "size"},
		{"unknown key", img(`{` + ok + `,"data":"iVBOR"}`), "data"},
		{"case twin key", img(`{` + ok + `,"SHA256":"x"}`), "SHA256"},
		{"duplicate key", img(`{` + ok + `,"name":"b.png"}`), "name"},
		{"not an array", `{"op":"send","id":"m","input":"x","images":{}}`, "images"},
		{"images on tsh", `{"op":"tsh","id":"m","args":["list"],"images":[{` + ok + `}]}`, "only send"},
		{"images on resume", `{"op":"resume","images":[]}`, "only send"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRequest([]byte(tc.line))
			if !errors.Is(err, ErrBadRequest) || Code(err) != CodeBadRequest {
				t.Fatalf("ParseRequest = %v, want bad_request", err)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %q does not say %q", err, tc.says)
			}
		})
	}
}

// TestDigestImages: images change a send's digest (a reused id with other
// images is an id_conflict), and a send without images keeps the digest it
// always had.
func TestDigestImages(t *testing.T) {
	in := "x"
	plain := Request{Op: OpSend, ID: "m", Session: "default", Scope: "private", Input: &in}
	// The digest of a send without images is what it was before images
	// existed: stored request ids keep replaying after an upgrade.
	j, _ := json.Marshal(struct {
		Op, Session, Scope, Cwd, Workspace string
		Input                              *string
		Args                               []string
	}{plain.Op, plain.Session, plain.Scope, plain.Cwd, plain.Workspace, plain.Input, plain.Args})
	sum := sha256.Sum256(j)
	if got, want := plain.Digest(), "sha256:"+hex.EncodeToString(sum[:])[:32]; got != want {
		t.Fatalf("digest without images = %s, want the old %s", got, want)
	}
	with := plain
	with.Images = []Image{{SHA256: hexA, MediaType: MediaPNG, Name: "a.png", Size: 1}}
	other := plain
	other.Images = []Image{{SHA256: hexA, MediaType: MediaPNG, Name: "b.png", Size: 1}}
	if plain.Digest() == with.Digest() || with.Digest() == other.Digest() {
		t.Fatalf("digests do not tell images apart: %s %s %s", plain.Digest(), with.Digest(), other.Digest())
	}
}

func TestImageLine(t *testing.T) {
	im := Image{SHA256: "abcd1234" + hexA[8:], MediaType: MediaPNG, Name: "shot.png", Size: 123456}
	if got, want := im.Line(), "[image shot.png, image/png, 123456 bytes, sha256:abcd1234aaaa…]"; got != want {
		t.Fatalf("Line = %q, want %q", got, want)
	}
	f := Frame{Type: TypeUser, Run: "r", ID: "m", Text: "hi", Images: []Image{im}}
	b, err := json.Marshal(&f)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"images":[{"sha256":"abcd1234`) {
		t.Fatalf("user frame %s does not carry the reference", b)
	}
}

// A client reading frames ignores what it does not know, in an image
// reference too (only requests are strict).
func TestFrameImagesLenient(t *testing.T) {
	var f Frame
	line := `{"type":"user","run":"r","id":"m","text":"x","images":[{"sha256":"` + hexA + `","media_type":"image/png","name":"a.png","size":1,"width":640}]}`
	if err := json.Unmarshal([]byte(line), &f); err != nil || len(f.Images) != 1 || f.Images[0].Name != "a.png" {
		t.Fatalf("frame %+v, %v", f, err)
	}
}
