package e2e

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pngFile is a PNG signature and header followed by n random bytes: the
// client and the daemon decide by the magic bytes, never decode.
func pngFile(t *testing.T, n int) []byte {
	t.Helper()
	b := append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"), make([]byte, n)...)
	if _, err := rand.Read(b[29:]); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestImageReachesTheProvider: `@shot.png` in a send to a model agent
// reaches the provider as an image block with the file's exact base64;
// the session's log holds the sha256 reference and never the bytes; the
// blob is in the session's store. A 6 MiB image, a symlinked image and an
// image for an executable agent are refused before anything runs; a blob
// gone from the store fails the next run, naming the image.
func TestImageReachesTheProvider(t *testing.T) {
	f := newFakeProvider(t, anthropicText("a tiny png"), anthropicText("pasted"))
	w := modelWorld(t, f, "anthropic/claude-sonnet-4-5")
	ws := t.TempDir()
	img := pngFile(t, 3000)
	if err := os.WriteFile(filepath.Join(ws, "shot.png"), img, 0o644); err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString(img)
	sum := sha256.Sum256(img)
	hexSum := hex.EncodeToString(sum[:])

	r := w.ctx(ws, "", "agent", "send", "m", "what is", "@shot.png", "?")
	if r.code != 0 || !strings.Contains(r.stdout, "a tiny png") {
		t.Fatalf("send: %d %s %s", r.code, r.stdout, r.stderr)
	}
	reqs := f.requests()
	want := `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + b64 + `"}}`
	if len(reqs) != 1 || !strings.Contains(reqs[0], want) {
		t.Fatalf("the provider's request lacks the image block with the file's base64 (%d requests)", len(reqs))
	}
	if !strings.Contains(reqs[0], `"text":"what is @shot.png ?"`) {
		t.Errorf("the message lost its words: %.400s", reqs[0])
	}
	ev, err := os.ReadFile(filepath.Join(w.sessionDir("m", "default"), "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ev), `"images":[{"sha256":"`+hexSum+`","media_type":"image/png","name":"shot.png","size":`+itoa(len(img))+`}]`) {
		t.Fatalf("events.jsonl lacks the reference:\n%s", ev)
	}
	for _, log := range []string{"events.jsonl", "messages.jsonl"} {
		b, _ := os.ReadFile(filepath.Join(w.sessionDir("m", "default"), log))
		if strings.Contains(string(b), b64[:64]) {
			t.Fatalf("%s holds the image's base64", log)
		}
	}
	blob := filepath.Join(w.sessionDir("m", "default"), "blobs", hexSum)
	if st, err := os.Lstat(blob); err != nil || st.Mode().Perm() != 0o600 || st.Size() != int64(len(img)) {
		t.Fatalf("blob %s: %v %v", blob, st, err)
	}
	// `ctx agent history` and `ctx agent prompt` show the reference.
	h := w.ctx(ws, "", "agent", "history", "m")
	if !strings.Contains(h.stdout, "[image shot.png, image/png, "+itoa(len(img))+" bytes, sha256:"+hexSum[:12]+"…]") || strings.Contains(h.stdout, b64[:64]) {
		t.Errorf("history: %d %s %s", h.code, h.stdout, h.stderr)
	}
	p := w.ctx(ws, "", "agent", "prompt", "m")
	if !strings.Contains(p.stdout, "[image shot.png, image/png") || strings.Contains(p.stdout, b64[:64]) {
		t.Errorf("prompt: %d %s %s", p.code, p.stdout, p.stderr)
	}

	// A pasted absolute path (a dragged file, "\ " escaped) outside the
	// workspace attaches that image; the first one goes again as history.
	img2 := pngFile(t, 500)
	pasted := filepath.Join(t.TempDir(), "Screen Shot.png")
	os.WriteFile(pasted, img2, 0o600)
	r = w.ctx(ws, "", "agent", "send", "m", "and", strings.ReplaceAll(pasted, " ", `\ `))
	if r.code != 0 || !strings.Contains(r.stdout, "pasted") {
		t.Fatalf("pasted path: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if reqs = f.requests(); len(reqs) != 2 || !strings.Contains(reqs[1], `"data":"`+base64.StdEncoding.EncodeToString(img2)+`"`) || !strings.Contains(reqs[1], want) {
		t.Fatalf("the second request lacks the pasted image or the first one (%d requests)", len(reqs))
	}

	// Over the bound: refused with the size and the bound, nothing sent.
	big := pngFile(t, 6<<20-29) // 6 MiB in all
	os.WriteFile(filepath.Join(ws, "big.png"), big, 0o644)
	r = w.ctx(ws, "", "agent", "send", "m", "and", "@big.png")
	if r.code != 2 || !strings.Contains(r.stderr, "6291456 bytes") || !strings.Contains(r.stderr, "5242880") {
		t.Fatalf("6 MiB image: %d %s", r.code, r.stderr)
	}
	// A symlinked image, as a mention and as a pasted path.
	os.Symlink(filepath.Join(ws, "shot.png"), filepath.Join(ws, "link.png"))
	r = w.ctx(ws, "", "agent", "send", "m", "and", "@link.png")
	if r.code != 2 || !strings.Contains(r.stderr, "@link.png") {
		t.Fatalf("symlinked image: %d %s", r.code, r.stderr)
	}
	r = w.ctx(ws, "", "agent", "send", "m", "and", filepath.Join(ws, "link.png"))
	if r.code != 2 || !strings.Contains(r.stderr, "symbolic link") {
		t.Fatalf("pasted symlinked image: %d %s", r.code, r.stderr)
	}
	after, _ := os.ReadFile(filepath.Join(w.sessionDir("m", "default"), "events.jsonl"))
	if len(f.requests()) != 2 || strings.Count(string(after), `"type":"user"`) != 2 {
		t.Fatalf("a refused image started a run: %d requests, log:\n%s", len(f.requests()), after)
	}

	// An executable agent takes no images: refused, nothing recorded.
	w.agent("x", nil)
	r = w.ctx(ws, "", "agent", "send", "x", "look", "@shot.png")
	if r.code == 0 || !strings.Contains(r.stderr+r.stdout, "agent x runs an executable; it takes no image input") {
		t.Fatalf("exec agent: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(w.sessionDir("x", "default"), "events.jsonl")); strings.Contains(string(b), `"type":"user"`) {
		t.Fatalf("the refused send was recorded:\n%s", b)
	}

	// A blob gone from the store: the next run fails, naming the image,
	// and nothing reaches the provider.
	os.Remove(blob)
	r = w.ctx(ws, "", "agent", "send", "m", "--json", "and now?")
	if r.code != 1 || !strings.Contains(r.stdout, `"code":"image_unavailable"`) || !strings.Contains(r.stdout, "shot.png") {
		t.Fatalf("missing blob: %d %s %s", r.code, r.stdout, r.stderr)
	}
	if len(f.requests()) != 2 {
		t.Fatalf("%d requests: a run without its image reached the provider", len(f.requests()))
	}
}

// TestImageToACPAgent: an acp-v1 agent gets ACP image blocks with the
// file's bytes when its initialize answer advertises
// promptCapabilities.image; one that does not ends the run with
// no_image_input and never sees the prompt.
func TestImageToACPAgent(t *testing.T) {
	img := pngFile(t, 2000)
	sum := sha256.Sum256(img)
	for _, tc := range []struct {
		name string
		args []string
	}{{"without the capability", nil}, {"with it", []string{"--images"}}} {
		t.Run(tc.name, func(t *testing.T) {
			w, _ := acpWorld(t, "auto", tc.args...)
			ws := t.TempDir()
			os.WriteFile(filepath.Join(ws, "shot.png"), img, 0o644)
			r := w.ctx(ws, "", "agent", "send", "acpa", "images", "@shot.png")
			if tc.args == nil {
				if r.code != 1 || !strings.Contains(r.stderr+r.stdout, "promptCapabilities.image") || strings.Contains(r.stdout, "images=") {
					t.Fatalf("no capability: %d %s %s", r.code, r.stdout, r.stderr)
				}
				ev, _ := os.ReadFile(filepath.Join(w.sessionDir("acpa", "default"), "events.jsonl"))
				if !strings.Contains(string(ev), `"code":"no_image_input"`) {
					t.Fatalf("events.jsonl:\n%s", ev)
				}
				return
			}
			if r.code != 0 || !strings.Contains(r.stdout, "images=1 image/png:"+hex.EncodeToString(sum[:])) {
				t.Fatalf("with the capability: %d %s %s", r.code, r.stdout, r.stderr)
			}
		})
	}
}
