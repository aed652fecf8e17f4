package words

import "testing"

func TestCount(t *testing.T) {
	for n, want := range map[int]string{0: "0 nodes", 1: "1 node", 2: "2 nodes"} {
		if got := Count(n, "node", "nodes"); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
}
