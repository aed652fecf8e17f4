package lvm

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// CommandError is a host command that exited with a non-zero code.
type CommandError struct {
	// Command is the command line without the runner's prefix.
	Command string
	// Code is the process's exit code.
	Code int
	// Stderr, trimmed.
	Stderr string
}

func (e *CommandError) Error() string {
	msg := firstLines(e.Stderr, 3)
	if msg == "" {
		msg = "no error output"
	}
	return fmt.Sprintf("%s: exit code %d: %s", e.Command, e.Code, msg)
}

// ExitCode returns the process's exit code. Other packages read it through interface{ ExitCode() int }
// without importing this one.
func (e *CommandError) ExitCode() int { return e.Code }

// firstLines keeps the first n non-empty lines of s, joined with "; ".
func firstLines(s string, n int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
			if len(out) == n {
				break
			}
		}
	}
	return strings.Join(out, "; ")
}

// errCommandTimeout is the cause of a context ended by a command's own timeout.
var errCommandTimeout = errors.New("command timeout")

// TimeoutError is a host command that did not finish within its timeout; it was killed with its whole
// process group. It wraps context.DeadlineExceeded.
type TimeoutError struct {
	// Command is the command line (the device, volume group or LV it works on is among its arguments).
	Command string
	After   time.Duration
}

func (e *TimeoutError) Error() string {
	// lvm2 prints nothing while it waits for a lock, so a held lock and a dead device look alike here.
	return fmt.Sprintf("`%s` hung: no exit after %s, so it was killed with its process group; the device or volume group it works on may be unresponsive (check dmesg and the device's I/O), or another lvm command holds the volume group's lock (check for long-running lvm processes)",
		e.Command, e.After)
}

// Unwrap makes errors.Is(err, context.DeadlineExceeded) true.
func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }

// AsTimeout returns the *TimeoutError in err's chain.
func AsTimeout(err error) (*TimeoutError, bool) {
	var te *TimeoutError
	ok := errors.As(err, &te)
	return te, ok
}

// AsCommandError returns the *CommandError in err's chain.
func AsCommandError(err error) (*CommandError, bool) {
	var ce *CommandError
	ok := errors.As(err, &ce)
	return ce, ok
}

// lvm2 exits with 5 (ECMD_FAILED) for most failures; "not found" is told apart by its message.
var notFoundRE = regexp.MustCompile(`Volume group "[^"]*" not found|Failed to find logical volume "[^"]*"|Failed to find physical volume "[^"]*"|Cannot process volume group`)

// IsNotFound reports whether err is lvm2 saying a VG, LV or PV does not exist.
func IsNotFound(err error) bool {
	ce, ok := AsCommandError(err)
	return ok && ce.Code == 5 && notFoundRE.MatchString(ce.Stderr)
}
