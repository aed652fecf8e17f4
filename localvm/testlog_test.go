package localvm

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/lvms-dev/lvms/testtier"
)

// Require skips a test that boots a VM under -short (make check).
func Require(t testing.TB) {
	t.Helper()
	testtier.Needs(t, "the VM lane (Debian's kernel under qemu)")
}

// testLog writes lines to the test log, each with a prefix.
type testLog struct {
	t      testing.TB
	prefix string
	mu     sync.Mutex
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		fmt.Fprintf(l.t.Output(), "%s%s\n", l.prefix, line)
	}
	return len(p), nil
}
