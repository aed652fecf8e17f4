package lvm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
)

// Recording is one real command and what it produced.
type Recording struct {
	// Argv without the runner's prefix.
	Argv     []string `json:"argv"`
	Stdout   string   `json:"stdout,omitempty"`
	Stderr   string   `json:"stderr,omitempty"`
	ExitCode int      `json:"exitCode,omitempty"`
	// TimedOut says the command was killed by its own timeout (a *TimeoutError, say lvm2 waiting on a
	// lock held by someone else); Stdout and Stderr then hold what it printed before. Replay answers it
	// with the same error.
	TimedOut bool `json:"timedOut,omitempty"`
}

// Session is a sequence of recordings made on a real system, stored as JSON under testdata.
type Session struct {
	// Source says where and how the output was recorded (kernel, lvm2 version, test).
	Source   string      `json:"source"`
	Commands []Recording `json:"commands"`
}

// LoadSession reads a session file.
func LoadSession(path string) (*Session, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read recorded session: %w", err)
	}
	var s Session
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("parse recorded session %s: %w", path, err)
	}
	return &s, nil
}

// Save writes the session as indented JSON.
func (s *Session) Save(path string) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode recorded session: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write recorded session: %w", err)
	}
	return nil
}

// Recorder runs commands with Next and records each one (without the prefix) into a Session.
type Recorder struct {
	Next Executor
	// PrefixLen is the number of leading argv elements (the runner's prefix) not to record.
	PrefixLen int

	mu      sync.Mutex
	session Session
}

// NewRecorder returns a recorder whose session says where it was recorded.
func NewRecorder(next Executor, source string) *Recorder {
	return &Recorder{Next: next, session: Session{Source: source}}
}

// Execute implements Executor. It records what the command produced, and a command killed by its own
// timeout; not a command that could not start or whose caller gave up (the context), which says nothing
// about lvm2.
func (r *Recorder) Execute(ctx context.Context, cmd Command) (Result, error) {
	next := r.Next
	if next == nil {
		next = OSExecutor{}
	}
	res, err := next.Execute(ctx, cmd)
	_, timedOut := AsTimeout(err)
	if err == nil || timedOut {
		argv := cmd.Argv
		if r.PrefixLen <= len(argv) {
			argv = argv[r.PrefixLen:]
		}
		r.mu.Lock()
		r.session.Commands = append(r.session.Commands, Recording{
			Argv: slices.Clone(argv), Stdout: string(res.Stdout), Stderr: string(res.Stderr), ExitCode: res.ExitCode,
			TimedOut: timedOut,
		})
		r.mu.Unlock()
	}
	return res, err
}

// Session returns a copy of what was recorded so far.
func (r *Recorder) Session() *Session {
	r.mu.Lock()
	defer r.mu.Unlock()
	return &Session{Source: r.session.Source, Commands: slices.Clone(r.session.Commands)}
}

// Replay answers commands from a recorded session instead of running them: it replays real output and
// says so in every error and in String. Each command line is answered by its recordings in order. It is
// strict, so a test notices a change in what the code runs: a command never recorded, one run more often
// than recorded and (through Check) recordings left unused are all violations. A violation is also
// returned as the command's error, but code may swallow that, so tests call Check (lvmtest.Replay does).
type Replay struct {
	name    string
	session *Session
	// PrefixLen is the number of leading argv elements (the runner's prefix) to ignore when matching.
	PrefixLen int
	// Repeat, when not empty, lets a command line run more often than recorded (its last recording answers
	// again, the state stays as last recorded) and says why, e.g. a poller whose number of reads is not fixed.
	Repeat string
	// AllowUnused, when not empty, says why recordings may be left unused; Check does not report them then.
	AllowUnused string

	mu         sync.Mutex
	next       map[string]int // argv key -> index into session.Commands of the next candidate
	used       []bool
	ran        []string
	violations []string
}

// NewReplay replays session; name (usually the file) appears in messages.
func NewReplay(name string, session *Session) *Replay {
	return &Replay{name: name, session: session, next: map[string]int{}, used: make([]bool, len(session.Commands))}
}

// String says that output is replayed, and from where.
func (r *Replay) String() string {
	return fmt.Sprintf("recorded lvm2 output from %s (%s)", r.name, r.session.Source)
}

func argvKey(argv []string) string { return strings.Join(argv, "\x00") }

// Execute implements Executor.
func (r *Replay) Execute(_ context.Context, cmd Command) (Result, error) {
	argv := cmd.Argv
	if r.PrefixLen <= len(argv) {
		argv = argv[r.PrefixLen:]
	}
	key := argvKey(argv)
	line := strings.Join(argv, " ")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ran = append(r.ran, line)
	start := r.next[key]
	last, times := -1, 0
	for i, rec := range r.session.Commands {
		if argvKey(rec.Argv) != key {
			continue
		}
		last, times = i, times+1
		if i >= start {
			r.next[key] = i + 1
			r.used[i] = true
			return recorded(rec, cmd)
		}
	}
	var msg string
	switch {
	case last >= 0 && r.Repeat != "":
		return recorded(r.session.Commands[last], cmd)
	case last >= 0:
		msg = fmt.Sprintf("`%s` ran more often than the %d time(s) recorded", line, times)
	default:
		msg = fmt.Sprintf("`%s` was never recorded", line)
	}
	r.violations = append(r.violations, msg)
	return Result{}, fmt.Errorf("replaying %s: %s; record it again in the VM lane", r, msg)
}

// recorded answers cmd as rec did. A timed-out recording fails as OSExecutor does, with cmd's own timeout,
// so replayed code takes the same path as on a node.
func recorded(rec Recording, cmd Command) (Result, error) {
	res := Result{Stdout: []byte(rec.Stdout), Stderr: []byte(rec.Stderr), ExitCode: rec.ExitCode}
	if rec.TimedOut {
		return res, &TimeoutError{Command: cmd.String(), After: cmd.Timeout}
	}
	return res, nil
}

// Check returns every violation so far and, unless AllowUnused says why not, the recordings never replayed:
// a recorded command the code no longer runs (or an extra one it now runs) is a change a test must see.
func (r *Replay) Check() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	problems := slices.Clone(r.violations)
	if r.AllowUnused == "" {
		for i, u := range r.used {
			if !u {
				problems = append(problems, fmt.Sprintf("recording %d `%s` was never replayed", i+1, strings.Join(r.session.Commands[i].Argv, " ")))
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("replaying %s:\n  %s", r, strings.Join(problems, "\n  "))
}

// Ran returns the command lines replayed so far, in order.
func (r *Replay) Ran() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ran)
}
