package lvm

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
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
