//go:build !linux

package blockcopy

import (
	"errors"
	"os"
)

// DiscardFile returns a Receiver.Discard that always fails (zeros are written instead): discards are
// Linux's.
func DiscardFile(f *os.File) func(off, length int64) error {
	return func(off, length int64) error { return errors.ErrUnsupported }
}
