package footprint

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// The kernel's process accounting (acct(2)) writes a record for every process when it exits; that is how
// the benchmark counts the processes each side starts (lvm commands, nsenter, and theirs), however short
// they live. Linux writes version 3 records, 64 bytes each (linux/acct.h, struct acct_v3).
const (
	acctRecordSize = 64
	acctVersion3   = 3
)

// Exited is one accounting record: a process that exited, its parent and its command name.
type Exited struct {
	PID, PPID int
	Command   string
}

// ParseAcct reads version 3 accounting records.
func ParseAcct(b []byte) ([]Exited, error) {
	if len(b)%acctRecordSize != 0 {
		return nil, fmt.Errorf("process accounting: %d bytes is not a whole number of %d-byte records", len(b), acctRecordSize)
	}
	var out []Exited
	for off := 0; off < len(b); off += acctRecordSize {
		r := b[off : off+acctRecordSize]
		if v := r[1] &^ 0x80; v != acctVersion3 { // the high bit marks the byte order, little endian here
			return nil, fmt.Errorf("process accounting: record %d has version %d, want %d", off/acctRecordSize, v, acctVersion3)
		}
		out = append(out, Exited{
			PID:     int(binary.LittleEndian.Uint32(r[16:20])),
			PPID:    int(binary.LittleEndian.Uint32(r[20:24])),
			Command: strings.TrimRight(string(r[48:64]), "\x00"),
		})
	}
	return out, nil
}

// Descendants counts the exited processes whose ancestry reaches one of roots (through the records
// themselves: nsenter's child lvm has nsenter as its parent), per root.
func Descendants(records []Exited, roots []int) map[int]int {
	parent := map[int]int{}
	for _, r := range records {
		parent[r.PID] = r.PPID
	}
	isRoot := map[int]bool{}
	for _, r := range roots {
		isRoot[r] = true
	}
	out := map[int]int{}
	for _, r := range records {
		p := r.PPID
		for range len(records) + 1 { // a chain is never longer than the records (and a cycle ends here)
			if isRoot[p] {
				out[p]++
				break
			}
			next, ok := parent[p]
			if !ok {
				break
			}
			p = next
		}
	}
	return out
}

// Accounting is the kernel's process accounting switched on into a file of its own.
type Accounting struct{ path string }

// StartAccounting switches process accounting on into path (machine-wide, root only).
func StartAccounting(path string) (*Accounting, error) {
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return nil, err
	}
	if err := unix.Acct(path); err != nil {
		return nil, fmt.Errorf("process accounting (acct(2)) into %s: %w (the kernel needs CONFIG_BSD_PROCESS_ACCT and the caller root)", path, err)
	}
	return &Accounting{path: path}, nil
}

// Records reads what was written so far.
func (a *Accounting) Records() ([]Exited, error) {
	b, err := os.ReadFile(a.path)
	if err != nil {
		return nil, err
	}
	return ParseAcct(b[:len(b)/acctRecordSize*acctRecordSize]) // a record being written is left for later
}

// Stop switches process accounting off.
func (a *Accounting) Stop() error {
	if _, _, errno := unix.Syscall(unix.SYS_ACCT, 0, 0, 0); errno != 0 {
		return fmt.Errorf("process accounting off: %w", errno)
	}
	return nil
}
