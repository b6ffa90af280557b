package seccomp

import "testing"

func checkNumbers(t *testing.T, a Arch, want map[string]uint32) {
	t.Helper()
	if len(want) != len(a.Nr) {
		t.Errorf("%s: table has %d names, checked %d", a.Name, len(a.Nr), len(want))
	}
	for name, n := range want {
		if a.Nr[name] != n {
			t.Errorf("%s %s: table %d, kernel %d", a.Name, name, a.Nr[name], n)
		}
	}
}
