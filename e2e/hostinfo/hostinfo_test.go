package hostinfo

import "testing"

func TestCPU_FirstModelName(t *testing.T) {
	in := "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nprocessor\t: 1\nmodel name\t: other\n"
	if got := cpu(in); got != "AMD EPYC 7B13" {
		t.Errorf("cpu = %q, want the first model name", got)
	}
	if got := cpu("garbage\n"); got != "" {
		t.Errorf("cpu of no model name = %q, want empty", got)
	}
}

func TestMemoryGiB_RoundsMemTotal(t *testing.T) {
	for in, want := range map[string]int{
		"MemTotal:       24568344 kB\nMemFree: 1 kB\n": 23, // 23.43 GiB
		"MemTotal:       25690112 kB\n":                25, // 24.5 GiB rounds up
		"MemFree: 1 kB\n":                              0,
		"MemTotal: lots kB\n":                          0,
	} {
		if got := memoryGiB(in); got != want {
			t.Errorf("memoryGiB(%q) = %d, want %d", in, got, want)
		}
	}
}
