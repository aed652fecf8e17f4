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

// Execute implements Executor.
func (r *Recorder) Execute(ctx context.Context, cmd Command) (Result, error) {
	next := r.Next
	if next == nil {
		next = OSExecutor{}
	}
	res, err := next.Execute(ctx, cmd)
	if err == nil {
		argv := cmd.Argv
		if r.PrefixLen <= len(argv) {
			argv = argv[r.PrefixLen:]
		}
		r.mu.Lock()
		r.session.Commands = append(r.session.Commands, Recording{
			Argv: slices.Clone(argv), Stdout: string(res.Stdout), Stderr: string(res.Stderr), ExitCode: res.ExitCode,
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
// says so in every error and in String. Each command line is answered by its recordings in order; once
// they are used up the last one answers again (the state stays as it was last recorded). A command that
// was never recorded is an error naming it.
type Replay struct {
	name    string
	session *Session
	// PrefixLen is the number of leading argv elements (the runner's prefix) to ignore when matching.
	PrefixLen int

	mu   sync.Mutex
	next map[string]int // argv key -> index into session.Commands of the next candidate
	ran  []string
}

// NewReplay replays session; name (usually the file) appears in messages.
func NewReplay(name string, session *Session) *Replay {
	return &Replay{name: name, session: session, next: map[string]int{}}
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
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ran = append(r.ran, strings.Join(argv, " "))
	start := r.next[key]
	last := -1
	for i, rec := range r.session.Commands {
		if argvKey(rec.Argv) != key {
			continue
		}
		last = i
		if i >= start {
			r.next[key] = i + 1
			return Result{Stdout: []byte(rec.Stdout), Stderr: []byte(rec.Stderr), ExitCode: rec.ExitCode}, nil
		}
	}
	if last >= 0 {
		rec := r.session.Commands[last]
		return Result{Stdout: []byte(rec.Stdout), Stderr: []byte(rec.Stderr), ExitCode: rec.ExitCode}, nil
	}
	return Result{}, fmt.Errorf("replaying %s: `%s` was never recorded; record it again in the VM lane", r, strings.Join(argv, " "))
}

// Ran returns the command lines replayed so far, in order.
func (r *Replay) Ran() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ran)
}
