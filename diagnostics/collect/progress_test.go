package collect_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/lvms-dev/lvms/diagnostics/collect"
)

func TestBar_DrawsOneLine(t *testing.T) {
	var out bytes.Buffer
	b := &collect.Bar{Out: &out, Width: 10}
	b.Update(1, 4, "resources/nodes")
	b.Update(4, 4, "node/worker-a")
	b.Done()
	got := out.String()
	for _, want := range []string{"\r[==        ] 1/4 resources/nodes", "\r[==========] 4/4 node/worker-a", "\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("bar output %q lacks %q", got, want)
		}
	}
	if strings.Count(got, "\n") != 1 {
		t.Errorf("the bar should stay on one line until Done: %q", got)
	}
}
