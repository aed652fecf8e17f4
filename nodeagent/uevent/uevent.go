// Package uevent tells the node agent when the kernel adds, removes or changes a block device, so that an
// idle agent need not look for changes it would be told about: it listens to the kernel's uevents on a
// NETLINK_KOBJECT_UEVENT socket. The kernel sends them to the host's network namespace only, so in a pod
// without host networking the socket is opened in PID 1's namespace (the agent's pod shares the host's
// PID namespace and is privileged).
package uevent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// Event is one kernel uevent.
type Event struct {
	// Action is add, remove, change, move, online, offline, bind or unbind.
	Action string
	// DevPath is the device's path under /sys.
	DevPath string
	// Env holds the KEY=value pairs (SUBSYSTEM, DEVNAME, DEVTYPE, MAJOR, MINOR, SEQNUM, ...).
	Env map[string]string
}

// Block reports whether the event is about a block device (a disk or a partition).
func (e Event) Block() bool { return e.Env["SUBSYSTEM"] == "block" }

// Parse reads one kernel uevent message: "ACTION@DEVPATH" then KEY=value fields, each NUL-terminated.
// Messages udev re-broadcasts (they start with "libudev") and malformed ones are refused.
func Parse(msg []byte) (Event, error) {
	fields := bytes.Split(bytes.TrimRight(msg, "\x00"), []byte{0})
	head := string(fields[0])
	action, devpath, ok := cutAt(head)
	if !ok {
		return Event{}, fmt.Errorf("uevent header %q: want ACTION@DEVPATH", truncate(head))
	}
	e := Event{Action: action, DevPath: devpath, Env: map[string]string{}}
	for _, f := range fields[1:] {
		k, v, ok := bytes.Cut(f, []byte("="))
		if !ok || len(k) == 0 {
			return Event{}, fmt.Errorf("uevent field %q of %s: want KEY=value", truncate(string(f)), devpath)
		}
		e.Env[string(k)] = string(v)
	}
	if a := e.Env["ACTION"]; a != "" && a != action {
		return Event{}, fmt.Errorf("uevent of %s: header says %s, ACTION=%s", devpath, action, a)
	}
	return e, nil
}

func cutAt(s string) (action, devpath string, ok bool) {
	action, devpath, ok = strings.Cut(s, "@")
	if !ok || action == "" || !strings.HasPrefix(devpath, "/") || len(devpath) < 2 {
		return "", "", false
	}
	return action, devpath, true
}

func truncate(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// Listener receives the kernel's uevents.
type Listener struct {
	f *os.File
}

// kernelGroup is the multicast group the kernel sends uevents to (udev uses 2 for its own).
const kernelGroup = 1

// Open opens a uevent socket in the host's network namespace (PID 1's, when it can be entered and differs
// from ours), else in ours.
func Open() (*Listener, error) {
	fd, err := inHostNetNS(func() (int, error) {
		return unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_KOBJECT_UEVENT)
	})
	if err != nil {
		return nil, fmt.Errorf("open the kernel's uevent socket: %w", err)
	}
	// A burst (hundreds of devices at boot) must not overflow into lost events: a bigger buffer, and a
	// lost event still ends in a resync (ENOBUFS is reported as an event).
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 4<<20)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: kernelGroup}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind the kernel's uevent socket: %w", err)
	}
	// Non-blocking under Go's poller, so that Close ends a pending read.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("uevent socket: %w", err)
	}
	return &Listener{f: os.NewFile(uintptr(fd), "uevent")}, nil
}

// inHostNetNS runs open with the calling thread in PID 1's network namespace; a socket keeps the namespace
// it was created in.
func inHostNetNS(open func() (int, error)) (int, error) {
	host, err := os.Open("/proc/1/ns/net")
	if err != nil {
		return open() // not allowed to look (not privileged): our own namespace
	}
	defer host.Close()
	var hostSt, selfSt unix.Stat_t
	if unix.Fstat(int(host.Fd()), &hostSt) != nil || unix.Stat("/proc/self/ns/net", &selfSt) != nil ||
		hostSt.Ino == selfSt.Ino && hostSt.Dev == selfSt.Dev {
		return open()
	}
	runtime.LockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return open()
	}
	defer self.Close()
	if err := unix.Setns(int(host.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return open()
	}
	fd, openErr := open()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread cannot go back: leave it locked so that it dies with its goroutine, not reused.
		if openErr == nil {
			return fd, nil
		}
		return -1, openErr
	}
	runtime.UnlockOSThread()
	return fd, openErr
}

// ErrLost reports that the kernel dropped events (the socket's buffer overflowed): something changed.
var ErrLost = errors.New("uevents were lost")

// Run reads events until ctx ends, calling on for each block device event (and with ErrLost for lost
// ones). It closes the socket when it returns.
func (l *Listener) Run(ctx context.Context, on func(Event, error)) error {
	stop := context.AfterFunc(ctx, func() { l.f.Close() })
	defer stop()
	defer l.f.Close()
	buf := make([]byte, 16<<10)
	for {
		n, err := l.f.Read(buf)
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case errors.Is(err, unix.ENOBUFS):
			on(Event{}, ErrLost)
			continue
		case err != nil:
			return fmt.Errorf("read uevents: %w", err)
		}
		e, err := Parse(buf[:n])
		if err != nil || !e.Block() {
			continue // a malformed message tells nothing; other subsystems do not matter here
		}
		on(e, nil)
	}
}
