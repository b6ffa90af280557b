package segments

import (
	"strings"
	"testing"
)

func TestParseRecord(t *testing.T) {
	ok := `{"epoch":9,"prev":5,"sealed":120,"seq":7,"node":"n1"}` + "\n"
	good, err := ParseRecord([]byte(ok))
	if err != nil {
		t.Fatalf("valid record: %v", err)
	}
	if want := (Record{Epoch: 9, Prev: 5, Sealed: 120, Seq: 7, Node: "n1"}); good != want {
		t.Fatalf("parsed %+v, want %+v", good, want)
	}
	if string(good.Line()) != ok {
		t.Fatalf("Line() = %q, want %q", good.Line(), ok)
	}
	for _, tc := range []struct{ name, line, why string }{
		{"no newline", `{"epoch":9,"prev":5,"sealed":120,"seq":7,"node":"n1"}`, "not one line"},
		{"two lines", `{"epoch":9,"prev":5,"sealed":120,"seq":7,"node":"n1"}` + "\n{}\n", "not one line"},
		{"empty", "", "not one line"},
		{"not json", "epoch 9\n", "epoch record"},
		{"array", "[1,2]\n", "epoch record"},
		{"missing key", `{"epoch":9,"prev":5,"sealed":120,"node":"n1"}` + "\n", "keys"},
		{"extra key", `{"epoch":9,"prev":5,"sealed":120,"seq":7,"node":"n1","x":1}` + "\n", "keys"},
		{"wrong key", `{"epoch":9,"prev":5,"sealed":120,"sq":7,"node":"n1"}` + "\n", `no "seq"`},
		{"duplicate key", `{"epoch":9,"prev":5,"sealed":120,"seq":7,"seq":7,"node":"n1"}` + "\n", "canonical"},
		{"reordered", `{"prev":5,"epoch":9,"sealed":120,"seq":7,"node":"n1"}` + "\n", "canonical"},
		{"spaces", `{"epoch": 9,"prev":5,"sealed":120,"seq":7,"node":"n1"}` + "\n", "canonical"},
		{"escaped node", `{"epoch":9,"prev":5,"sealed":120,"seq":7,"node":"\u006e1"}` + "\n", "canonical"},
		{"float", `{"epoch":9,"prev":5,"sealed":120.0,"seq":7,"node":"n1"}` + "\n", "not an integer"},
		{"exponent", `{"epoch":9e0,"prev":5,"sealed":120,"seq":7,"node":"n1"}` + "\n", "not an integer"},
		{"quoted number", `{"epoch":"9","prev":5,"sealed":120,"seq":7,"node":"n1"}` + "\n", "not an integer"},
		{"overflow", `{"epoch":99999999999999999999,"prev":5,"sealed":120,"seq":7,"node":"n1"}` + "\n", "not an integer"},
		{"null node", `{"epoch":9,"prev":5,"sealed":120,"seq":7,"node":null}` + "\n", "node is not a string"},
		{"numeric node", `{"epoch":9,"prev":5,"sealed":120,"seq":7,"node":1}` + "\n", "node is not a string"},
		{"empty node", `{"epoch":9,"prev":5,"sealed":120,"seq":7,"node":""}` + "\n", "node is empty"},
		{"epoch 0", `{"epoch":0,"prev":0,"sealed":0,"seq":0,"node":"n1"}` + "\n", "epoch 0"},
		{"prev = epoch", `{"epoch":9,"prev":9,"sealed":120,"seq":7,"node":"n1"}` + "\n", "prev 9"},
		{"prev > epoch", `{"epoch":9,"prev":12,"sealed":120,"seq":7,"node":"n1"}` + "\n", "prev 12"},
		{"negative prev", `{"epoch":9,"prev":-1,"sealed":120,"seq":7,"node":"n1"}` + "\n", "prev -1"},
		{"negative sealed", `{"epoch":9,"prev":5,"sealed":-1,"seq":7,"node":"n1"}` + "\n", "sealed -1"},
		{"negative seq", `{"epoch":9,"prev":5,"sealed":120,"seq":-7,"node":"n1"}` + "\n", "seq -7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRecord([]byte(tc.line))
			if err == nil || !strings.Contains(err.Error(), tc.why) {
				t.Fatalf("ParseRecord(%q) = %v, want an error saying %q", tc.line, err, tc.why)
			}
		})
	}
}

func TestParseName(t *testing.T) {
	for _, tc := range []struct {
		name  string
		epoch int64
		ok    bool
	}{
		{Name(1), 1, true},
		{Name(9223372036854775807), 9223372036854775807, true},
		{"00000000000000000042.jsonl", 42, true},
		{"00000000000000000000.jsonl", 0, false}, // epoch 0 is events.jsonl
		{"0000000000000000042.jsonl", 0, false},  // 19 digits
		{"+0000000000000000042.jsonl", 0, false},
		{"-0000000000000000042.jsonl", 0, false},
		{"99999999999999999999.jsonl", 0, false}, // overflows int64
		{"00000000000000000042.json", 0, false},
		{".00000000000000000042.jsonl.tmp", 0, false},
		{"events.jsonl", 0, false},
	} {
		e, ok := parseName(tc.name)
		if e != tc.epoch || ok != tc.ok {
			t.Errorf("parseName(%q) = %d, %v; want %d, %v", tc.name, e, ok, tc.epoch, tc.ok)
		}
	}
}

// FuzzParseRecord: any line either fails or parses to a valid record whose
// canonical line is exactly the input.
func FuzzParseRecord(f *testing.F) {
	f.Add([]byte(`{"epoch":9,"prev":5,"sealed":120,"seq":7,"node":"n1"}` + "\n"))
	f.Add([]byte(`{"epoch":1,"prev":0,"sealed":0,"seq":0,"node":"a\u00e9"}` + "\n"))
	f.Add([]byte(`{"epoch":9,"prev":5,"sealed":120,"seq":7,"seq":7,"node":"n1"}` + "\n"))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := ParseRecord(line)
		if err != nil {
			return
		}
		if r.validate() != nil || string(r.Line()) != string(line) {
			t.Fatalf("accepted %q as %+v", line, r)
		}
	})
}
