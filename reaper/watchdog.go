package reaper

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Bounds of the watchdog's work once the binary is gone.
const (
	// killBound bounds killing the marked processes: one that has not died by then (in uninterruptible
	// sleep, say) is reported as still running.
	killBound = 10 * time.Second
	// killPoll is how often the processes are looked for again while some still carry the mark (a
	// process forking while it is killed leaves a child to kill too).
	killPoll = 10 * time.Millisecond
)

// serve is the watchdog: it reads registrations until the pipe closes, then cleans up what is left and
// reports it on standard error. It returns the exit code.
func serve(in *os.File, token string) int {
	// Not ended with the binary's process group (it has a session of its own anyway), and a report written
	// after go test closed the output is lost rather than fatal.
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGPIPE)
	_ = os.WriteFile("/proc/self/comm", []byte("lvms-reaper"), 0) // what ps shows, rather than "exe"
	if token == "" {
		fmt.Fprintln(os.Stderr, "lvms test reaper: started without the owner's mark; nothing to do")
		return 2
	}
	owner, _, _ := strings.Cut(token, "-")
	var reg registry
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			fmt.Fprintf(os.Stderr, "lvms test reaper: unreadable registration %q: %v\n", sc.Text(), err)
			continue
		}
		reg.apply(m)
	}
	// EOF (or a read error): the binary is gone, however it ended.
	if report := cleanup(token, reg); len(report) > 0 {
		fmt.Fprintf(os.Stderr, "lvms test reaper: test process %s ended leaving these behind: %s\n", owner, strings.Join(report, "; "))
	}
	return 0
}

// registry is what the watchdog is to clean up, in registration order.
type registry struct {
	remove []string // paths
	detach []string // backing files of loop devices
}

func (r *registry) apply(m message) {
	add := func(list []string) []string {
		if slices.Contains(list, m.Path) {
			return list
		}
		return append(list, m.Path)
	}
	switch m.Op {
	case opRemove:
		r.remove = add(r.remove)
	case opDetach:
		r.detach = add(r.detach)
	case opForget:
		r.remove = slices.DeleteFunc(r.remove, func(p string) bool { return p == m.Path })
		r.detach = slices.DeleteFunc(r.detach, func(p string) bool { return p == m.Path })
	}
}

// cleanup ends the marked processes, removes the registered paths, unmounts and detaches the registered
// loop devices, and returns what it did and what failed, one entry each.
func cleanup(token string, reg registry) []string {
	var report []string
	report = append(report, killMarked(token)...)
	// Paths before devices: a path named after a device (a /dev/disk/by-id link) goes while the device is
	// still attached, so no other binary can have attached that device again and made that path its own.
	for _, path := range slices.Backward(reg.remove) {
		report = append(report, removePath(path)...)
	}
	for _, file := range reg.detach {
		report = append(report, detachLoops(file)...)
	}
	return report
}

// killMarked kills every process carrying token (and, for a process group's leader, its whole group) until
// none is left, or killBound has passed.
func killMarked(token string) []string {
	self := os.Getpid()
	var killed []string
	seen := map[int]bool{}
	deadline := time.Now().Add(killBound)
	for {
		procs := marked(token, self)
		if len(procs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			var left []string
			for _, p := range procs {
				left = append(left, p.String())
			}
			killed = append(killed, "still running after SIGKILL: "+strings.Join(left, ", "))
			break
		}
		for _, p := range procs {
			if !seen[p.pid] {
				seen[p.pid] = true
				killed = append(killed, "killed "+p.String())
			}
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
			if p.pgid == p.pid {
				_ = syscall.Kill(-p.pid, syscall.SIGKILL)
			}
		}
		time.Sleep(killPoll)
	}
	return killed
}

// proc is a process read from /proc.
type proc struct {
	pid, pgid int
	comm      string
	state     byte
}

func (p proc) String() string { return fmt.Sprintf("%s (pid %d)", p.comm, p.pid) }

// marked lists the live processes, other than self, whose environment carries token.
func marked(token string, self int) []proc {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(ownerEnv + "=" + token)
	var out []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !hasVar(env, want) {
			continue
		}
		p, err := readProc(pid)
		if err != nil || p.state == 'Z' || p.state == 'X' {
			continue // gone, or dead and waiting to be reaped by its new parent
		}
		out = append(out, p)
	}
	return out
}

// hasVar tells whether the NUL-separated environment env holds the entry want ("NAME=value") exactly.
func hasVar(env, want []byte) bool {
	for entry := range bytes.SplitSeq(env, []byte{0}) {
		if bytes.Equal(entry, want) {
			return true
		}
	}
	return false
}

// readProc reads a process's name, state and process group from /proc/<pid>/stat.
func readProc(pid int) (proc, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return proc{}, err
	}
	return parseStat(pid, string(b))
}

// parseStat parses /proc/<pid>/stat: "pid (comm) state ppid pgrp ...", where comm may hold spaces and
// parentheses (so the last ")" ends it).
func parseStat(pid int, stat string) (proc, error) {
	open, end := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return proc{}, fmt.Errorf("/proc/%d/stat: %q", pid, stat)
	}
	fields := strings.Fields(stat[end+1:])
	if len(fields) < 3 || len(fields[0]) != 1 {
		return proc{}, fmt.Errorf("/proc/%d/stat: %q", pid, stat)
	}
	pgid, err := strconv.Atoi(fields[2])
	if err != nil {
		return proc{}, fmt.Errorf("/proc/%d/stat: %q", pid, stat)
	}
	return proc{pid: pid, pgid: pgid, comm: stat[open+1 : end], state: fields[0][0]}, nil
}

// loopDevice is an attached loop device: its name under /sys/block and /dev, the names and device numbers
// ("major:minor") of it and its partitions.
type loopDevice struct {
	name  string
	names []string
	nums  []string
}

// loopsBackedBy lists the loop devices whose backing file is file (also once file was deleted, and when a
// directory on its path is a symbolic link the kernel resolved).
func loopsBackedBy(file string) []loopDevice {
	candidates := []string{file}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(file)); err == nil {
		candidates = append(candidates, filepath.Join(dir, filepath.Base(file)))
	}
	sys, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	var out []loopDevice
	for _, bf := range sys {
		b, err := os.ReadFile(bf)
		if err != nil {
			continue // detached meanwhile
		}
		backing := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), " (deleted)")
		if !slices.Contains(candidates, backing) {
			continue
		}
		block := filepath.Dir(filepath.Dir(bf))
		d := loopDevice{name: filepath.Base(block)}
		parts, _ := filepath.Glob(filepath.Join(block, d.name+"p*"))
		for _, dir := range append([]string{block}, parts...) {
			d.names = append(d.names, "/dev/"+filepath.Base(dir))
			if num, err := os.ReadFile(filepath.Join(dir, "dev")); err == nil {
				d.nums = append(d.nums, strings.TrimSpace(string(num)))
			}
		}
		out = append(out, d)
	}
	return out
}

// detachLoops lazily unmounts everything mounted from a loop device backed by file (or from its
// partitions), then detaches the device.
func detachLoops(file string) []string {
	var report []string
	for _, d := range loopsBackedBy(file) {
		for _, m := range slices.Backward(mounts()) {
			if slices.Contains(d.nums, m.num) || slices.Contains(d.names, m.source) {
				report = append(report, unmount(m, "from /dev/"+d.name))
			}
		}
		report = append(report, detach(d, file))
	}
	return report
}

// detach detaches a loop device: LOOP_CLR_FD detaches it at once, or, while something still holds it open,
// marks it to be detached when the last holder closes it (as losetup -d does).
func detach(d loopDevice, file string) string {
	f, err := os.OpenFile("/dev/"+d.name, os.O_RDONLY, 0)
	if err == nil {
		err = unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0)
		f.Close()
	}
	if err != nil {
		return fmt.Sprintf("could not detach /dev/%s (%s): %v", d.name, file, err)
	}
	return fmt.Sprintf("detached /dev/%s (%s)", d.name, file)
}

// removePath lazily unmounts what is mounted at or under path, then removes path.
func removePath(path string) []string {
	if _, err := os.Lstat(path); err != nil {
		return nil // removed already
	}
	var report []string
	for _, m := range slices.Backward(mounts()) {
		if m.point == path || strings.HasPrefix(m.point, path+"/") {
			report = append(report, unmount(m, "inside "+path))
		}
	}
	if err := os.RemoveAll(path); err != nil {
		return append(report, fmt.Sprintf("could not remove %s: %v", path, err))
	}
	return append(report, "removed "+path)
}

func unmount(m mount, why string) string {
	if err := unix.Unmount(m.point, unix.MNT_DETACH); err != nil {
		return fmt.Sprintf("could not unmount %s (%s, %s): %v", m.point, m.source, why, err)
	}
	return fmt.Sprintf("unmounted %s (%s, %s)", m.point, m.source, why)
}

// mount is one line of /proc/self/mountinfo.
type mount struct {
	num, point, source string
}

// mounts reads this mount namespace's mounts, in mount order.
func mounts() []mount {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	return parseMountinfo(string(b))
}

// parseMountinfo parses mountinfo: "id parent major:minor root point options [optional...] - type source
// superoptions", with spaces, tabs, newlines and backslashes in paths written as octal escapes.
func parseMountinfo(s string) []mount {
	var out []mount
	for line := range strings.Lines(s) {
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if len(f) < 5 || sep < 0 || sep+2 >= len(f) {
			continue
		}
		out = append(out, mount{num: f[2], point: unescape(f[4]), source: unescape(f[sep+2])})
	}
	return out
}

// unescape undoes mountinfo's octal escapes (\040 is a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
