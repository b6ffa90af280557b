package prompt

import (
	"errors"
	"strings"
	"testing"

	"github.com/cortexfs/ctx/ipc"
)

var shot = ipc.Image{SHA256: strings.Repeat("ab", 32), MediaType: ipc.MediaPNG, Name: "shot.png", Size: 1234}

// The input's images go with the final user message as references, each
// charged ImageChars against the window besides its JSON; the prompt hash
// is the one `ctx agent prompt` prints, which cannot see the input.
func TestInputImages(t *testing.T) {
	in, _ := fixture(t)
	plain, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	in.Images = []ipc.Image{shot}
	r, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	msgs := r.Messages()
	last := msgs[len(msgs)-1]
	if last.Role != "user" || len(last.Images) != 1 || last.Images[0] != shot {
		t.Fatalf("final message %+v does not carry the image", last)
	}
	if !strings.Contains(string(r.JSON()), `"images":[{"sha256":"abab`) {
		t.Fatalf("JSON %s lacks the reference", r.JSON())
	}
	if r.Hash != plain.Hash {
		t.Fatalf("hash with an image %s differs from the placeholder render's %s", r.Hash, plain.Hash)
	}
	charged(t, r, 1)
	// A window whose budget the prompt fits without the image but not with
	// its charge: the image is never dropped to make room.
	in.WindowTokens = budgetTokens(ImageChars - 100)
	in.Images = nil
	if _, err := Build(in); err != nil {
		t.Fatalf("without the image: %v", err)
	}
	in.Images = []ipc.Image{shot}
	_, err = Build(in)
	var be *BudgetError
	if !errors.As(err, &be) || be.Need < ImageChars {
		t.Fatalf("Build = %v, want a BudgetError counting the image's %d", err, ImageChars)
	}
}

// charged checks the cost model: the array's bytes plus n images' charge,
// within the budget.
func charged(t *testing.T, r *Result, n int) {
	t.Helper()
	if got, want := arrayCost(r.Messages()), len(r.JSON())+n*ImageChars; got != want {
		t.Fatalf("cost %d, want JSON %d + %d images", got, len(r.JSON()), n)
	}
	if r.BudgetChars >= 0 && arrayCost(r.Messages()) > r.BudgetChars {
		t.Fatalf("charged %d > budget %d", arrayCost(r.Messages()), r.BudgetChars)
	}
}

// A history message's images stay with it and are charged too: a window
// too small for them leaves that message out of the view.
func TestHistoryImagesCharged(t *testing.T) {
	in, _ := fixture(t)
	in.History = []Message{{Role: "user", Content: "see this", Images: []ipc.Image{shot}}, {Role: "assistant", Content: "a png"}}
	r, err := Build(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.History) != 2 || len(r.History[0].Images) != 1 {
		t.Fatalf("history %+v lost its image", r.History)
	}
	src, err := Collect(in)
	if err != nil {
		t.Fatal(err)
	}
	plain := in
	plain.History = []Message{{Role: "user", Content: "see this"}, {Role: "assistant", Content: "a png"}}
	// Some window keeps the message without its image and leaves it out
	// with it; at every window the charge is within the budget.
	differs := 0 // windows, in steps of 5 tokens
	for tokens := uint32(1500); tokens < 6000; tokens += 5 {
		in.WindowTokens, plain.WindowTokens = tokens, tokens
		ri, err := src.Render(in)
		if err != nil {
			continue
		}
		charged(t, ri, countImages(ri.Messages()))
		rp, err := src.Render(plain)
		if err != nil {
			t.Fatalf("%d tokens: the image's message fits, the plain one not: %v", tokens, err)
		}
		if len(rp.History) == 2 && len(ri.History) < 2 {
			differs++
		}
	}
	// Its reference alone is some 130 bytes; with the charge the windows
	// that keep one and not the other span about ImageTokens.
	if differs*5 < ImageTokens/2 {
		t.Fatalf("%d windows left the imaged message out while keeping the plain one: the image's charge is not counted", differs)
	}
	// Inlined ({{history}}), an image is its reference line.
	if got := historyBlock(Message{Role: "user", Content: "see this", Images: []ipc.Image{shot}}); !strings.Contains(got, "[image shot.png, image/png, 1234 bytes, sha256:abababababab…]") {
		t.Fatalf("inline block %q", got)
	}
}

func countImages(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Images)
	}
	return n
}
