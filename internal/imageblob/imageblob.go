// Package imageblob is a session's content-addressed image store,
// SESSION_DIR/blobs/<sha256 hex>: the client puts the bytes of an image a
// message attaches there, and the daemon reads them back — without
// following a link, bounded, the hash and the type checked again — when it
// builds a model request. The session's log holds only references.
package imageblob

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/cortexfs/ctx/internal/atomicfile"
	"github.com/cortexfs/ctx/ipc"
)

// DirName is the blob store's directory inside a session directory.
const DirName = "blobs"

// ErrBlob classes every failure to use an attached image: missing,
// changed, not an image, too large.
var ErrBlob = errors.New("image unavailable")

// Sniff names the image type of b by its magic bytes — PNG, JPEG, GIF or
// WebP — or returns "" for anything else. A file's name never decides.
func Sniff(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return ipc.MediaPNG
	case bytes.HasPrefix(b, []byte{0xff, 0xd8, 0xff}):
		return ipc.MediaJPEG
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return ipc.MediaGIF
	case len(b) >= 12 && bytes.Equal(b[:4], []byte("RIFF")) && bytes.Equal(b[8:12], []byte("WEBP")):
		return ipc.MediaWebP
	}
	return ""
}

// Sum is the lowercase hex sha256 of b, a blob's name.
func Sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// ErrTooLarge is wrapped when an image is over ipc.MaxImageBytes.
var ErrTooLarge = errors.New("image too large")

// ErrNotImage is wrapped when a file's bytes are not PNG, JPEG, GIF or WebP.
var ErrNotImage = errors.New("not an image")

// ReadOpen reads an opened file as an image: a regular file of at most
// ipc.MaxImageBytes whose magic bytes name a known type. It returns the
// bytes and that type; the caller decides how the file was opened.
func ReadOpen(f *os.File) ([]byte, string, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, "", err
	}
	if !st.Mode().IsRegular() {
		return nil, "", fmt.Errorf("%s is not a regular file", st.Mode().Type())
	}
	if st.Size() > ipc.MaxImageBytes {
		return nil, "", fmt.Errorf("%d bytes, over the %d bytes (5 MiB) an image may have: %w", st.Size(), ipc.MaxImageBytes, ErrTooLarge)
	}
	b, err := io.ReadAll(io.LimitReader(f, ipc.MaxImageBytes+1))
	if err != nil {
		return nil, "", err
	}
	if len(b) > ipc.MaxImageBytes {
		return nil, "", fmt.Errorf("over the %d bytes (5 MiB) an image may have: %w", ipc.MaxImageBytes, ErrTooLarge)
	}
	mt := Sniff(b)
	if mt == "" {
		return nil, "", ErrNotImage
	}
	return b, mt, nil
}

// Put stores b in the session's blob store under its sha256 (mode 0600,
// written atomically; nothing is written when a regular file of that name
// is there already — its bytes are checked when read) and returns the
// hash. The blobs directory is created 0700; one that is a symbolic link
// is refused.
func Put(sessionDir string, b []byte) (string, error) {
	dir := filepath.Join(sessionDir, DirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("image store: %w", err)
	}
	if st, err := os.Lstat(dir); err != nil || !st.IsDir() {
		if err == nil {
			err = fmt.Errorf("%s is not a directory", dir)
		}
		return "", fmt.Errorf("image store: %w", err)
	}
	sum := Sum(b)
	p := filepath.Join(dir, sum)
	if st, err := os.Lstat(p); err == nil && st.Mode().IsRegular() {
		return sum, nil
	}
	// The rename replaces whatever else has the name (a planted link
	// itself, never what it points to).
	if err := atomicfile.WriteFile(p, b, 0o600); err != nil {
		return "", fmt.Errorf("image store: %w", err)
	}
	return sum, nil
}

// Read reads the blob an image reference names from the session's store
// as the daemon must: the directory and the blob opened without following
// a link, a regular file of at most ipc.MaxImageBytes, its sha256 equal to
// the reference's, its type sniffed again (the reference's media type is
// not trusted). It returns the bytes and the sniffed type; every failure
// wraps ErrBlob and names the image.
func Read(sessionDir string, im ipc.Image) ([]byte, string, error) {
	fail := func(format string, a ...any) ([]byte, string, error) {
		return nil, "", fmt.Errorf("image %s (sha256:%.12s…): %s: %w", im.Name, im.SHA256, fmt.Sprintf(format, a...), ErrBlob)
	}
	if len(im.SHA256) != 64 {
		return fail("not a sha256")
	}
	dfd, err := unix.Open(filepath.Join(sessionDir, DirName), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail("the session's image store: %v", err)
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, im.SHA256, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fail("missing from the session's image store")
		}
		return fail("%v", err)
	}
	f := os.NewFile(uintptr(fd), im.SHA256)
	defer f.Close()
	b, mt, err := ReadOpen(f)
	if err != nil {
		return fail("%v", err)
	}
	if Sum(b) != im.SHA256 {
		return fail("its bytes no longer match the sha256 it was sent with")
	}
	return b, mt, nil
}
