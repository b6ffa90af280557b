package ctxd

import "testing"

func TestDaemonProcs(t *testing.T) {
	for _, c := range []struct {
		found int
		env   string
		want  int
		ok    bool
	}{
		{1, "", 1, true},
		{2, "", 1, true},
		{3, "", 1, true},
		{4, "", 2, true},
		{64, "", 32, true},
		{2, "2", 0, false}, // the user's GOMAXPROCS stands
		{8, "1", 0, false},
		{8, "  ", 4, true}, // Go ignores what is not a positive number
		{8, "abc", 4, true},
		{8, "0", 4, true},
		{8, "-2", 4, true},
	} {
		n, ok := daemonProcs(c.found, c.env)
		if n != c.want || ok != c.ok {
			t.Errorf("daemonProcs(%d, %q) = %d, %v; want %d, %v", c.found, c.env, n, ok, c.want, c.ok)
		}
	}
}
