package exitcode

import (
	"errors"
	"testing"
)

// TestPinnedStatuses: the numbers users' scripts test are interfaces.md's.
func TestPinnedStatuses(t *testing.T) {
	for got, want := range map[int]int{OK: 0, RunError: 1, Usage: 2, Unavailable: 3, NotAllowed: 126, NotFound: 127, Cancelled: 130, LostLease: 75} {
		if got != want {
			t.Errorf("status %d, want %d", got, want)
		}
	}
	base := errors.New("boom")
	var e *Error
	if err := With(Usage, base); !errors.As(err, &e) || e.Code != Usage || !errors.Is(err, base) || err.Error() != "boom" {
		t.Errorf("With: %v", err)
	}
	if s := (&Error{Code: 3}).Error(); s != "exit 3" {
		t.Errorf("no cause: %q", s)
	}
}
