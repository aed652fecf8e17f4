// Package lvmtest holds test helpers for replaying recorded lvm2 sessions.
package lvmtest

import (
	"testing"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
)

// Replay loads a recorded session and returns its strict replay; when the test ends it fails the test on
// every violation (a command not recorded, one run too often) and on every recording left unused. Set
// the replay's Repeat or AllowUnused, with the reason, where a test may not use a recording exactly once.
// hint says how to record the file again.
func Replay(t testing.TB, file, hint string) *lvm.Replay {
	t.Helper()
	s, err := lvm.LoadSession(file)
	if err != nil {
		t.Fatalf("%v: %s", err, hint)
	}
	return Session(t, file, s)
}

// Session is Replay for a session already loaded.
func Session(t testing.TB, name string, s *lvm.Session) *lvm.Replay {
	t.Helper()
	rp := lvm.NewReplay(name, s)
	t.Cleanup(func() {
		if err := rp.Check(); err != nil {
			t.Error(err)
		}
	})
	return rp
}
