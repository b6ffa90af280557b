package fileerr

import (
	"errors"
	"testing"
)

func TestError(t *testing.T) {
	kind := errors.New("invalid")
	for _, c := range []struct {
		e    *Error
		want string
	}{
		{&Error{File: "p", Line: 3, Msg: "bad rule", Kind: kind}, "p:3: bad rule"},
		{&Error{File: "p", Msg: "not a regular file", Kind: kind}, "p: not a regular file"},
	} {
		if c.e.Error() != c.want || !errors.Is(c.e, kind) {
			t.Errorf("%q (is kind: %v), want %q", c.e.Error(), errors.Is(c.e, kind), c.want)
		}
	}
}
