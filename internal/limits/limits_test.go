package limits

import (
	"strings"
	"testing"
)

// TestParse: the grammar of .d/limits, defaults for absent keys, and every
// kind of bad input refused with a message naming the line. limits
func TestParse(t *testing.T) {
	cases := []struct {
		in   string
		want Limits
		err  string // substring of the error; "" = valid
	}{
		{"", Default, ""},
		{"# nothing\n\n", Default, ""},
		{"tasks 64\n", Limits{64, Default.Memory, 100, 0, 8}, ""},
		{"memory 256M\n", Limits{512, 256 << 20, 100, 0, 8}, ""},
		{"memory 1G\ncpu-weight 50\ntasks 1000\n", Limits{1000, 1 << 30, 50, 0, 8}, ""},
		{"  tasks\t64   # comment? no: three fields\n", Limits{}, "line 1: want `KEY VALUE`"},
		{"# c\n  memory   32768K  \n", Limits{512, 32 << 20, 100, 0, 8}, ""},
		{"memory 17179869184\n", Limits{512, 16 << 30, 100, 0, 8}, ""},
		{"memory 2T\n", Limits{512, 2 << 40, 100, 0, 8}, ""},
		{"tasks 64", Limits{}, "LF-terminated"},
		{"tasks 64\r\n", Limits{}, "LF-terminated"},
		{"tasks 6\x004\n", Limits{}, "LF-terminated"},
		{"\xff\n", Limits{}, "LF-terminated"},
		{"tasks\n", Limits{}, "want `KEY VALUE`"},
		{"tasks 64 128\n", Limits{}, "want `KEY VALUE`"},
		{"tasks 64\ntasks 65\n", Limits{}, "line 2: tasks given twice"},
		{"nproc 64\n", Limits{}, `unknown key "nproc"`},
		{"Tasks 64\n", Limits{}, "unknown key"},
		{"tasks -1\n", Limits{}, "outside"},
		{"tasks +64\n", Limits{}, "not a decimal"},
		{"tasks 064\n", Limits{}, "not a decimal"},
		{"tasks 0x40\n", Limits{}, "not a decimal"},
		{"tasks 1\n", Limits{}, "outside 8…"},
		{"tasks 4194305\n", Limits{}, "outside"},
		{"tasks max\n", Limits{}, "not a decimal"},
		{"tasks 99999999999999999999\n", Limits{}, "not a decimal"},
		{"memory 1M\n", Limits{}, "outside 16M"},
		{"memory 256m\n", Limits{}, "not a size"},
		{"memory 256MB\n", Limits{}, "not a size"},
		{"memory 256 M\n", Limits{}, "want `KEY VALUE`"},
		{"memory G\n", Limits{}, "not a size"},
		{"memory -1G\n", Limits{}, "not a size"},
		{"memory 1.5G\n", Limits{}, "not a size"},
		{"memory 9999999999T\n", Limits{}, "too large"},
		{"memory 2000T\n", Limits{}, "outside"},
		{"cpu-weight 0\n", Limits{}, "outside 1…10000"},
		{"cpu-weight 10001\n", Limits{}, "outside"},
		{"cpu_weight 100\n", Limits{}, "unknown key"},
		{"disk 300M\n", Limits{512, Default.Memory, 100, 300 << 20, 8}, ""},
		{"disk 1M\ntasks 64\n", Limits{64, Default.Memory, 100, 1 << 20, 8}, ""},
		{"disk 1048576\n", Limits{512, Default.Memory, 100, 1 << 20, 8}, ""},
		{"disk 1023K\n", Limits{}, "outside 1M"},
		{"disk 0\n", Limits{}, "outside 1M"},
		{"disk 2000T\n", Limits{}, "outside"},
		{"disk 1.5G\n", Limits{}, "not a size"},
		{"disk -1M\n", Limits{}, "not a size"},
		{"disk\n", Limits{}, "want `KEY VALUE`"},
		{"disk 1G\ndisk 2G\n", Limits{}, "line 2: disk given twice"},
		{"Disk 1G\n", Limits{}, "unknown key"},
		{"calls 20\n", Limits{512, Default.Memory, 100, 0, 20}, ""},
		{"calls 1\ntasks 64\n", Limits{64, Default.Memory, 100, 0, 1}, ""},
		{"calls 1000\n", Limits{512, Default.Memory, 100, 0, 1000}, ""},
		{"calls 8\n", Default, ""},
		{"calls 0\n", Limits{}, "outside 1…1000"},
		{"calls 1001\n", Limits{}, "outside 1…1000"},
		{"calls -3\n", Limits{}, "outside"},
		{"calls 020\n", Limits{}, "not a decimal"},
		{"calls many\n", Limits{}, "not a decimal"},
		{"calls\n", Limits{}, "want `KEY VALUE`"},
		{"calls 9\ncalls 9\n", Limits{}, "line 2: calls given twice"},
		{"Calls 9\n", Limits{}, "unknown key"},
	}
	for _, c := range cases {
		got, err := Parse([]byte(c.in))
		if c.err == "" {
			if err != nil || got != c.want {
				t.Errorf("Parse(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("Parse(%q) = %+v, %v; want an error containing %q", c.in, got, err, c.err)
		}
	}
}

func TestFormatRoundTrip(t *testing.T) {
	for _, l := range []Limits{Default, {8, MinMemory, 1, 0, 8}, {MaxTasks, MaxMemory, MaxCPUWeight, 0, 8}, {100, 32<<20 + 1024, 7, 0, 8}, {9, 16<<20 + 1, 2, 0, 8},
		{64, 1 << 30, 100, MinDisk, 8}, {64, 1 << 30, 100, MaxDisk, 8}, {64, 1 << 30, 100, 5<<20 + 1, 8}, {64, 1 << 30, 100, 0, 20}, {512, 4 << 30, 100, 0, MaxCalls}, {512, 4 << 30, 100, MinDisk, MinCalls}} {
		got, err := Parse(l.Format())
		if err != nil || got != l {
			t.Errorf("%+v: Format %q parsed back as %+v, %v", l, l.Format(), got, err)
		}
	}
	if s := Default.String(); s != "tasks 512, memory 4G, cpu-weight 100" {
		t.Errorf("String() = %q", s)
	}
	if s := (Limits{512, 4 << 30, 100, 0, 20}).String(); s != "tasks 512, memory 4G, cpu-weight 100, calls 20" {
		t.Errorf("String() = %q", s)
	}
	if s := (Limits{512, 4 << 30, 100, 300 << 20, 8}).String(); s != "tasks 512, memory 4G, cpu-weight 100, disk 300M (agent home, watched)" {
		t.Errorf("String() = %q", s)
	}
}

// FuzzParse: Parse never panics; what it accepts is in range and survives
// a round trip through Format.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "tasks 64\n", "memory 256M\n", "cpu-weight 100\n", "# c\ntasks 512\nmemory 4G\ncpu-weight 100\n",
		"tasks 64\ntasks 64\n", "memory 9999999999T\n", "nproc 1\n", "memory 1K\n", "tasks\t 99 \n\n", "memory 17179869184\n",
		"disk 300M\n", "disk 1023K\n", "disk 0\n", "tasks 64\ndisk 1G\n", "disk 1G\ndisk 1G\n", "calls 20\n", "calls 0\n", "calls 1000\ntasks 64\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := Parse(b)
		if err != nil {
			return
		}
		if l.Tasks < MinTasks || l.Tasks > MaxTasks || l.Memory < MinMemory || l.Memory > MaxMemory ||
			l.CPUWeight < MinCPUWeight || l.CPUWeight > MaxCPUWeight || (l.Disk != 0 && (l.Disk < MinDisk || l.Disk > MaxDisk)) ||
			l.Calls < MinCalls || l.Calls > MaxCalls {
			t.Fatalf("accepted out of range: %+v from %q", l, b)
		}
		back, err := Parse(l.Format())
		if err != nil || back != l {
			t.Fatalf("round trip of %+v: %+v, %v", l, back, err)
		}
	})
}
