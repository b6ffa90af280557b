package imageblob

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/ipc"
)

// Small real headers of each type (the rest of a file is never looked at).
var (
	pngBytes  = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	jpegBytes = []byte{0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 'J', 'F', 'I', 'F', 0x00}
	gifBytes  = []byte("GIF89a\x01\x00\x01\x00\x80\x00\x00")
	webpBytes = []byte("RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00")
)

func TestSniff(t *testing.T) {
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"png", pngBytes, ipc.MediaPNG},
		{"jpeg", jpegBytes, ipc.MediaJPEG},
		{"gif87a", []byte("GIF87a\x01\x00"), ipc.MediaGIF},
		{"gif89a", gifBytes, ipc.MediaGIF},
		{"webp", webpBytes, ipc.MediaWebP},
		{"riff but wave", []byte("RIFF\x1a\x00\x00\x00WAVEfmt "), ""},
		{"riff too short", []byte("RIFF\x1a\x00\x00\x00WEB"), ""},
		{"png signature cut", []byte("\x89PNG\r\n"), ""},
		{"text named .png", []byte("just text, whatever the file is called"), ""},
		{"svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`), ""},
		{"empty", nil, ""},
		{"two jpeg bytes", []byte{0xff, 0xd8}, ""},
	}
	for _, tc := range cases {
		if got := Sniff(tc.b); got != tc.want {
			t.Errorf("%s: Sniff = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestPutThenRead(t *testing.T) {
	sess := t.TempDir()
	sum, err := Put(sess, pngBytes)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(sess, DirName, sum)
	st, err := os.Lstat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("blob %s: %v %v, want a 0600 file", p, st, err)
	}
	if dst, _ := os.Stat(filepath.Join(sess, DirName)); dst.Mode().Perm() != 0o700 {
		t.Fatalf("blobs dir mode %v, want 0700", dst.Mode().Perm())
	}
	// The client's media type is not trusted: the sniffed one comes back.
	im := ipc.Image{SHA256: sum, MediaType: ipc.MediaGIF, Name: "a.png", Size: int64(len(pngBytes))}
	b, mt, err := Read(sess, im)
	if err != nil || !bytes.Equal(b, pngBytes) || mt != ipc.MediaPNG {
		t.Fatalf("Read = %d bytes, %q, %v", len(b), mt, err)
	}
	// A second Put of the same bytes writes nothing new.
	if again, err := Put(sess, pngBytes); err != nil || again != sum {
		t.Fatalf("second Put = %s, %v", again, err)
	}
}

func TestReadFailsClosed(t *testing.T) {
	sess := t.TempDir()
	sum, err := Put(sess, pngBytes)
	if err != nil {
		t.Fatal(err)
	}
	blob := filepath.Join(sess, DirName, sum)
	ref := ipc.Image{SHA256: sum, MediaType: ipc.MediaPNG, Name: "shot.png", Size: 1}
	check := func(what, says string) {
		t.Helper()
		_, _, err := Read(sess, ref)
		if !errors.Is(err, ErrBlob) || !strings.Contains(err.Error(), "shot.png") || !strings.Contains(err.Error(), says) {
			t.Fatalf("%s: Read = %v, want ErrBlob naming shot.png and saying %q", what, err, says)
		}
	}
	// Changed bytes (an agent may write its session directory).
	if err := os.WriteFile(blob, append(bytes.Clone(pngBytes), 'x'), 0o600); err != nil {
		t.Fatal(err)
	}
	check("changed", "no longer match")
	// Not an image any more.
	if err := os.WriteFile(blob, []byte("text"), 0o600); err != nil {
		t.Fatal(err)
	}
	check("text", "not an image")
	// A link in its place, even to the right bytes.
	other := filepath.Join(t.TempDir(), "real.png")
	if err := os.WriteFile(other, pngBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(blob)
	if err := os.Symlink(other, blob); err != nil {
		t.Fatal(err)
	}
	check("symlink", "symbolic link")
	// Missing.
	os.Remove(blob)
	check("missing", "missing")
	// Over the bound.
	big := make([]byte, ipc.MaxImageBytes+1)
	copy(big, pngBytes)
	bigSum := Sum(big)
	if err := os.WriteFile(filepath.Join(sess, DirName, bigSum), big, 0o600); err != nil {
		t.Fatal(err)
	}
	ref.SHA256 = bigSum
	check("too large", "5 MiB")
	// The store itself a link.
	ref.SHA256 = sum
	os.RemoveAll(filepath.Join(sess, DirName))
	real := t.TempDir()
	if _, err := Put(real, pngBytes); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(real, DirName), filepath.Join(sess, DirName)); err != nil {
		t.Fatal(err)
	}
	check("store a link", "image store")
	if _, err := Put(sess, pngBytes); err == nil {
		t.Fatal("Put wrote through a blobs directory that is a symbolic link")
	}
}
