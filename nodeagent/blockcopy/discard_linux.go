package blockcopy

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DiscardFile returns a Receiver.Discard for f: BLKDISCARD for a block device (a thin logical volume
// unmaps the range, which then reads as zeros without taking room in its pool), a punched hole for a
// regular file (the same on a file system, for tests).
func DiscardFile(f *os.File) func(off, length int64) error {
	return func(off, length int64) error {
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		var op func(fd uintptr) error
		switch m := fi.Mode(); {
		case m&os.ModeDevice != 0 && m&os.ModeCharDevice == 0:
			op = func(fd uintptr) error {
				r := [2]uint64{uint64(off), uint64(length)}
				if _, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, unix.BLKDISCARD, uintptr(unsafe.Pointer(&r))); errno != 0 {
					return errno
				}
				return nil
			}
		case m.IsRegular():
			op = func(fd uintptr) error {
				return unix.Fallocate(int(fd), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, length)
			}
		default:
			return fmt.Errorf("discard in %s: neither a block device nor a regular file", f.Name())
		}
		rc, err := f.SyscallConn()
		if err != nil {
			return err
		}
		var opErr error
		if err := rc.Control(func(fd uintptr) { opErr = op(fd) }); err != nil {
			return err
		}
		if opErr != nil {
			return fmt.Errorf("discard bytes %d-%d of %s: %w", off, off+length-1, f.Name(), opErr)
		}
		return nil
	}
}
