package fakeexec

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	utilexec "k8s.io/utils/exec"
)

// Device is what the fake knows about one block device.
type Device struct {
	FSType string
	Size   int64
	// FSSize is the file system's size: the device's size when it was made or last grown.
	FSSize int64
	// Formats counts mkfs runs; Grows counts file system resizes.
	Formats int
	Grows   int
}

// Exec implements utilexec.Interface over in-memory devices.
type Exec struct {
	mu      sync.Mutex
	devices map[string]*Device
}

var _ utilexec.Interface = (*Exec)(nil)

// New returns a fake with no formatted devices.
func New() *Exec { return &Exec{devices: map[string]*Device{}} }

// Device returns a copy of a device's state.
func (e *Exec) Device(path string) Device {
	e.mu.Lock()
	defer e.mu.Unlock()
	if d, ok := e.devices[path]; ok {
		return *d
	}
	return Device{}
}

// SetSize sets a device's size (blockdev --getsize64).
func (e *Exec) SetSize(path string, size int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dev(path).Size = size
}

func (e *Exec) dev(path string) *Device {
	d, ok := e.devices[path]
	if !ok {
		d = &Device{}
		e.devices[path] = d
	}
	return d
}

// Command implements utilexec.Interface.
func (e *Exec) Command(cmd string, args ...string) utilexec.Cmd {
	return &command{exec: e, name: cmd, args: args}
}

// CommandContext implements utilexec.Interface.
func (e *Exec) CommandContext(_ context.Context, cmd string, args ...string) utilexec.Cmd {
	return e.Command(cmd, args...)
}

// LookPath implements utilexec.Interface.
func (e *Exec) LookPath(file string) (string, error) { return "/usr/sbin/" + file, nil }

// run executes one command against the state.
func (e *Exec) run(name string, args []string) (string, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	last := ""
	if len(args) > 0 {
		last = args[len(args)-1]
	}
	switch {
	case name == "blkid":
		d, ok := e.devices[last]
		if !ok || d.FSType == "" {
			return "", 2
		}
		return fmt.Sprintf("DEVNAME=%s\nTYPE=%s\n", last, d.FSType), 0
	case name == "wipefs":
		e.dev(last).FSType = ""
		return "", 0
	case strings.HasPrefix(name, "mkfs."):
		d := e.dev(last)
		d.FSType = strings.TrimPrefix(name, "mkfs.")
		d.FSSize = d.Size
		d.Formats++
		return "", 0
	case name == "fsck":
		return "", 0
	case name == "resize2fs", name == "xfs_growfs":
		// resize2fs names the device; xfs_growfs the mount point, so count per argument.
		d := e.dev(last)
		d.Grows++
		d.FSSize = d.Size
		return "", 0
	case name == "btrfs" && len(args) > 2 && args[0] == "inspect-internal":
		return fmt.Sprintf("sectorsize\t\t4096\ntotal_bytes\t\t%d\n", max(e.dev(last).FSSize, 4096)), 0
	case name == "btrfs" && len(args) > 2 && args[0] == "filesystem" && args[1] == "resize":
		e.dev(last).Grows++
		return "", 0
	case name == "blockdev" && len(args) > 0 && args[0] == "--getsize64":
		return fmt.Sprintf("%d\n", e.dev(last).Size), 0
	case name == "blockdev" && len(args) > 0 && args[0] == "--getro":
		return "0\n", 0
	}
	return fmt.Sprintf("%s: command not found", name), 127
}

type command struct {
	exec   *Exec
	name   string
	args   []string
	stdout io.Writer
	stderr io.Writer
}

func (c *command) exit(code int) error {
	if code == 0 {
		return nil
	}
	return &utilexec.CodeExitError{Err: fmt.Errorf("%s %s: exit status %d", c.name, strings.Join(c.args, " "), code), Code: code}
}

func (c *command) CombinedOutput() ([]byte, error) {
	out, code := c.exec.run(c.name, c.args)
	return []byte(out), c.exit(code)
}

func (c *command) Output() ([]byte, error) { return c.CombinedOutput() }

func (c *command) Run() error {
	out, err := c.CombinedOutput()
	if c.stdout != nil {
		_, _ = c.stdout.Write(out)
	}
	return err
}

func (c *command) SetDir(string)         {}
func (c *command) SetStdin(io.Reader)    {}
func (c *command) SetStdout(w io.Writer) { c.stdout = w }
func (c *command) SetStderr(w io.Writer) { c.stderr = w }
func (c *command) SetEnv([]string)       {}
func (c *command) Start() error          { return nil }
func (c *command) Wait() error           { return c.Run() }
func (c *command) Stop()                 {}
func (c *command) StdoutPipe() (io.ReadCloser, error) {
	out, _ := c.exec.run(c.name, c.args)
	return io.NopCloser(bytes.NewReader([]byte(out))), nil
}
func (c *command) StderrPipe() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(nil)), nil }
