package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/internal/imageblob"
	"github.com/cortexfs/ctx/internal/layout"
	"github.com/cortexfs/ctx/ipc"
)

var testPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")

// TestPastedPaths: how a terminal pastes a dragged file — bare, with "\ "
// escapes, single- or double-quoted — becomes the path; prose does not.
func TestPastedPaths(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want []string
	}{
		{"/tmp/shot.png", []string{"/tmp/shot.png"}},
		{"what is /tmp/shot.png about", []string{"/tmp/shot.png"}},
		{`/home/me/Screen\ Shot\ 2026.png what is it`, []string{"/home/me/Screen Shot 2026.png"}},
		{`/tmp/a\(1\).png`, []string{"/tmp/a(1).png"}},
		{`see '/home/me/Screen Shot.png' now`, []string{"/home/me/Screen Shot.png"}},
		{`see '/tmp/back\slash.png'`, []string{`/tmp/back\slash.png`}},
		{`"/home/me/say \"hi\".png"`, []string{`/home/me/say "hi".png`}},
		{"two: /a.png\n/b.gif", []string{"/a.png", "/b.gif"}},
		{"see /tmp/a.png.", []string{"/tmp/a.png.", "/tmp/a.png"}},
		{"a/b.png and x/tmp/a.png and 'rel.png' and @/workspace/a.png", nil},
		{"'/unterminated", nil},
		{`"relative/in quotes.png"`, nil},
		{"", nil},
	} {
		if got := pastedPaths(tc.msg); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("pastedPaths(%q) = %q, want %q", tc.msg, got, tc.want)
		}
	}
}

// TestImageMentionsAndPastes: an @mention of an image (by its bytes, not
// its name) and a pasted absolute image path attach the image; the bounds
// and the link rules refuse with the reason.
func TestImageMentionsAndPastes(t *testing.T) {
	ws := t.TempDir()
	out := t.TempDir()
	write := func(p string, b []byte) {
		t.Helper()
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(ws, "shot.png"), testPNG)
	write(filepath.Join(ws, "notes.png"), []byte("text named png\n")) // the name does not decide
	write(filepath.Join(ws, "photo.txt"), testPNG)                    // nor here
	big := make([]byte, 6<<20)
	copy(big, testPNG)
	write(filepath.Join(ws, "big.png"), big)
	os.Symlink(filepath.Join(ws, "shot.png"), filepath.Join(ws, "link.png"))
	write(filepath.Join(out, "Screen Shot.png"), testPNG)
	write(filepath.Join(out, "text"), []byte("hello"))
	os.Symlink(filepath.Join(out, "Screen Shot.png"), filepath.Join(out, "link.png"))

	text, ims, err := attachMentions("look @shot.png and @notes.png and @photo.txt", ws)
	if err != nil {
		t.Fatal(err)
	}
	if len(ims) != 2 || ims[0].Name != "shot.png" || ims[0].MediaType != ipc.MediaPNG || !bytes.Equal(ims[0].Data, testPNG) || ims[1].Name != "photo.txt" {
		t.Fatalf("images %+v", ims)
	}
	if !strings.Contains(text, `<file path="notes.png">`) || strings.Contains(text, `path="shot.png"`) || strings.Contains(text, "PNG") {
		t.Fatalf("text %q: the text file inline, the images not", text)
	}
	for _, tc := range []struct{ msg, says string }{
		{"@big.png", "6291456 bytes, over the 5242880 bytes (5 MiB)"},
		{"@link.png", "not a file of the workspace"},
	} {
		if _, _, err := attachMentions(tc.msg, ws); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want an error saying %q", tc.msg, err, tc.says)
		}
	}

	esc := strings.ReplaceAll(filepath.Join(out, "Screen Shot.png"), " ", `\ `)
	ims, err = attachImages("what is "+esc+" and "+filepath.Join(out, "text")+" and /no/such.png", nil)
	if err != nil || len(ims) != 1 || ims[0].Name != "Screen Shot.png" || !bytes.Equal(ims[0].Data, testPNG) {
		t.Fatalf("pasted: %+v, %v", ims, err)
	}
	if _, err := attachImages(filepath.Join(out, "link.png"), nil); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("pasted link: %v", err)
	}
	if _, err := attachImages(filepath.Join(ws, "big.png"), nil); err == nil || !strings.Contains(err.Error(), "5 MiB") {
		t.Fatalf("pasted big: %v", err)
	}
	var nine []attachedImage
	for i := 0; i < 9; i++ {
		nine = append(nine, attachedImage{Name: strconv.Itoa(i)})
	}
	if _, err := attachImages("", nine); err == nil || !strings.Contains(err.Error(), "at most 8") {
		t.Fatalf("nine images: %v", err)
	}
}

// TestStoreImages: the bytes land in the session's blob store under their
// sha256, 0600, and the reference names them.
func TestStoreImages(t *testing.T) {
	l := layout.Layout{Root: t.TempDir(), UID: os.Getuid()}
	refs, err := storeImages(l, "a", layout.ScopePrivate, "s1", []attachedImage{{Name: "shot.png", MediaType: ipc.MediaPNG, Data: testPNG}})
	if err != nil {
		t.Fatal(err)
	}
	sum := imageblob.Sum(testPNG)
	want := []ipc.Image{{SHA256: sum, MediaType: ipc.MediaPNG, Name: "shot.png", Size: int64(len(testPNG))}}
	if !reflect.DeepEqual(refs, want) || ipc.CheckImages(refs) != nil {
		t.Fatalf("refs %+v", refs)
	}
	p := filepath.Join(l.SessionDir("a", layout.ScopePrivate, "s1"), imageblob.DirName, sum)
	st, err := os.Lstat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("blob %s: %v %v", p, st, err)
	}
	if _, err := storeImages(l, "a", layout.ScopePrivate, "../x", []attachedImage{{Data: testPNG}}); err == nil {
		t.Fatal("a bad session name reached the file system")
	}
}

func TestPastedFileIsNotACommand(t *testing.T) {
	p := filepath.Join(t.TempDir(), "shot.png")
	os.WriteFile(p, testPNG, 0o644)
	if !pastedFile(p + " what is it") {
		t.Fatal("a pasted file path taken for a command")
	}
	for _, cmd := range []string{"/help", "/history s", "/tmp"} {
		if pastedFile(cmd) {
			t.Errorf("%s taken for a pasted file", cmd)
		}
	}
	if got := imageName("a\x1b[2Jb.png"); got != "a_[2Jb.png" {
		t.Errorf("imageName = %q", got)
	}
}
