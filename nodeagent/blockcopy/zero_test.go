package blockcopy_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/lvms-dev/lvms/nodeagent/blockcopy"
)

const zcs = 64 << 10 // the chunk size of these tests

// sparseVolume is a 4 MiB source that is zero but for chunks 0, 7 and 63 (random data), and a target
// file of the source's size and 1 MiB more, a hole unless the test writes to it.
func sparseVolume(t *testing.T) *volume {
	t.Helper()
	dir := t.TempDir()
	v := &volume{dir: dir, size: 4 << 20, progress: filepath.Join(dir, "progress.json")}
	v.src = emptyFile(t, dir, "source.img", v.size)
	f := open(t, v.src, os.O_RDWR)
	for _, c := range []int64{0, 7, 63} {
		writeRandom(t, offsetWriter{f, c * zcs}, zcs, uint64(c))
	}
	v.sum = sha256File(t, v.src, v.size)
	v.dst = emptyFile(t, dir, "target.img", v.size+1<<20)
	v.srcF = open(t, v.src, os.O_RDONLY)
	v.dstF = open(t, v.dst, os.O_RDWR)
	return v
}

type offsetWriter struct {
	io.WriterAt
	off int64
}

func (o offsetWriter) WriteAt(p []byte, off int64) (int, error) {
	return o.WriterAt.WriteAt(p, o.off+off)
}

// stale writes non-zero data into the target where the source is zero: a whole chunk (20) and a few
// bytes in another (40).
func (v *volume) stale(t *testing.T) {
	t.Helper()
	writeRandom(t, offsetWriter{v.dstF, 20 * zcs}, zcs, 99)
	if _, err := v.dstF.WriteAt([]byte("stale"), 40*zcs+1234); err != nil {
		t.Fatal(err)
	}
}

// allocated is how many bytes of the file the file system allocated.
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Blocks * 512
}

// countingDiscard counts the calls and bytes of a Discard.
type countingDiscard struct {
	next         func(off, length int64) error
	calls, bytes atomic.Int64
}

func (c *countingDiscard) discard(off, length int64) error {
	c.calls.Add(1)
	c.bytes.Add(length)
	return c.next(off, length)
}

func TestCopy_ThinTarget_ZeroChunksAreNotWrittenStaleDataIsDiscardedAndTheWholeVolumeVerifies(t *testing.T) {
	v := sparseVolume(t)
	v.stale(t)
	r := v.receiver(t, "move-1")
	d := &countingDiscard{next: blockcopy.DiscardFile(v.dstF)}
	r.Discard = d.discard
	o := run(t, t.Context(), v.sender("move-1", zcs), r, plain, plain, nil)
	if o.sendErr != nil || o.recvErr != nil {
		t.Fatalf("copy failed: sender %v, receiver %v", o.sendErr, o.recvErr)
	}
	if got := sha256File(t, v.dst, v.size); got != v.sum || o.recv.SHA256 != v.sum {
		t.Fatalf("target SHA-256 %s (reported %s), source %s", got, o.recv.SHA256, v.sum)
	}
	if o.sent.BytesSent != 3*zcs || o.sent.ZeroChunks != 61 {
		t.Errorf("sender sent %d bytes of data and %d zero chunks, want 3 chunks of data (%d bytes) and 61 zero chunks", o.sent.BytesSent, o.sent.ZeroChunks, 3*zcs)
	}
	if o.recv.ZeroChunks != 61 {
		t.Errorf("receiver counted %d zero chunks, want the 61 the sender sent", o.recv.ZeroChunks)
	}
	if o.recv.BytesWritten != 3*zcs {
		t.Errorf("receiver wrote %d bytes, want only the 3 chunks with data (%d bytes)", o.recv.BytesWritten, 3*zcs)
	}
	if o.recv.BytesDiscarded != 2*zcs || d.calls.Load() != 2 {
		t.Errorf("receiver discarded %d bytes in %d calls, want the 2 chunks with stale data (%d bytes)", o.recv.BytesDiscarded, d.calls.Load(), 2*zcs)
	}
	// What a user sees on a thin volume: the target holds the source's data, not its size.
	if got := allocated(t, v.dst); got > 3*zcs+64<<10 {
		t.Errorf("the target file has %d bytes allocated after the copy, want about the source's %d bytes of data", got, 3*zcs)
	}
}

func TestCopy_ThickTarget_ZeroChunksAreWrittenAsZeros(t *testing.T) {
	v := sparseVolume(t)
	writeRandom(t, v.dstF, v.size, 5) // a thick LV holds whatever its extents held before
	o := run(t, t.Context(), v.sender("move-1", zcs), v.receiver(t, "move-1"), plain, plain, nil)
	if o.sendErr != nil || o.recvErr != nil {
		t.Fatalf("copy failed: sender %v, receiver %v", o.sendErr, o.recvErr)
	}
	if got := sha256File(t, v.dst, v.size); got != v.sum {
		t.Fatalf("target SHA-256 %s, source %s", got, v.sum)
	}
	if o.sent.BytesSent != 3*zcs || o.recv.BytesWritten != v.size || o.recv.BytesDiscarded != 0 {
		t.Errorf("sent %d bytes, wrote %d, discarded %d; want 3 chunks sent (%d bytes) and every byte written (%d)",
			o.sent.BytesSent, o.recv.BytesWritten, o.recv.BytesDiscarded, 3*zcs, v.size)
	}
}

func TestCopy_DiscardThatLeavesData_FallsBackToWritingZeros(t *testing.T) {
	for name, discard := range map[string]func(off, length int64) error{
		"a discard that is only a hint": func(off, length int64) error { return nil },
		"a target without discard":      func(off, length int64) error { return syscall.EOPNOTSUPP },
	} {
		t.Run(name, func(t *testing.T) {
			v := sparseVolume(t)
			v.stale(t)
			r := v.receiver(t, "move-1")
			r.Discard = discard
			o := run(t, t.Context(), v.sender("move-1", zcs), r, plain, plain, nil)
			if o.sendErr != nil || o.recvErr != nil {
				t.Fatalf("copy failed: sender %v, receiver %v", o.sendErr, o.recvErr)
			}
			if got := sha256File(t, v.dst, v.size); got != v.sum {
				t.Fatalf("target SHA-256 %s, source %s: the stale data stayed", got, v.sum)
			}
			if o.recv.BytesWritten != 5*zcs || o.recv.BytesDiscarded != 0 {
				t.Errorf("wrote %d bytes and discarded %d, want the 3 data chunks and the 2 stale ones written (%d bytes)", o.recv.BytesWritten, o.recv.BytesDiscarded, 5*zcs)
			}
		})
	}
}

// countingCheck is a SpaceCheck that counts its calls and fails from call fail on (0: never).
type countingCheck struct {
	calls atomic.Int64
	fail  int64
}

func (c *countingCheck) check(context.Context) error {
	if n := c.calls.Add(1); c.fail > 0 && n >= c.fail {
		return errors.New("thin pool vg0/pool0 is 91.0% full, past the device class's data usage threshold 90%")
	}
	return nil
}

func TestCopy_SpaceCheck_AskedAtTheStartAndEverySoManyBytesWritten(t *testing.T) {
	t.Run("every MiB written", func(t *testing.T) {
		v := newVolume(t, 4<<20)
		r := v.receiver(t, "move-1")
		c := &countingCheck{}
		r.SpaceCheck, r.SpaceCheckEvery = c.check, 1<<20
		o := run(t, t.Context(), v.sender("move-1", zcs), r, plain, plain, nil)
		if o.sendErr != nil || o.recvErr != nil {
			t.Fatalf("copy failed: sender %v, receiver %v", o.sendErr, o.recvErr)
		}
		if got := c.calls.Load(); got != 4 {
			t.Errorf("the space was checked %d times for 4 MiB written, want 4 (at the start, then after 1, 2 and 3 MiB)", got)
		}
	})
	t.Run("zero chunks skipped on a thin target write nothing", func(t *testing.T) {
		v := sparseVolume(t)
		r := v.receiver(t, "move-1")
		r.Discard = blockcopy.DiscardFile(v.dstF)
		c := &countingCheck{}
		r.SpaceCheck, r.SpaceCheckEvery = c.check, 2*zcs
		o := run(t, t.Context(), v.sender("move-1", zcs), r, plain, plain, nil)
		if o.sendErr != nil || o.recvErr != nil {
			t.Fatalf("copy failed: sender %v, receiver %v", o.sendErr, o.recvErr)
		}
		if got := c.calls.Load(); got != 2 {
			t.Errorf("the space was checked %d times for 3 chunks written, want 2 (at the start and after the second)", got)
		}
	})
	t.Run("a full pool at the start refuses the transfer", func(t *testing.T) {
		v := newVolume(t, 1<<20)
		r := v.receiver(t, "move-1")
		r.SpaceCheck = (&countingCheck{fail: 1}).check
		o := run(t, t.Context(), v.sender("move-1", zcs), r, plain, plain, nil)
		const want = "the receiver refused the transfer: thin pool vg0/pool0 is 91.0% full, past the device class's data usage threshold 90%"
		if o.sendErr == nil || !strings.Contains(o.sendErr.Error(), want) {
			t.Fatalf("sender: %v, want %q", o.sendErr, want)
		}
		if o.recvErr == nil || !strings.Contains(o.recvErr.Error(), "91.0% full") {
			t.Fatalf("receiver: %v", o.recvErr)
		}
		v.requireUntouched(t)
	})
	t.Run("a pool that fills stops the copy", func(t *testing.T) {
		v := newVolume(t, 4<<20)
		r := v.receiver(t, "move-1")
		r.SpaceCheck, r.SpaceCheckEvery = (&countingCheck{fail: 3}).check, 1<<20
		o := run(t, t.Context(), v.sender("move-1", zcs), r, plain, plain, nil)
		if o.recvErr == nil || !strings.Contains(o.recvErr.Error(), "91.0% full") {
			t.Fatalf("receiver: %v, want the pool's error", o.recvErr)
		}
		if o.sendErr == nil {
			t.Fatal("the sender reported success for a copy the receiver stopped")
		}
		if o.recv.BytesWritten != 2<<20 {
			t.Errorf("the receiver wrote %d bytes, want 2 MiB (stopped at the third check)", o.recv.BytesWritten)
		}
	})
}

// blockAt is a source whose reads at or beyond offset wait until release is closed; reached is closed
// when the first such read starts.
type blockAt struct {
	io.ReaderAt
	offset           int64
	reached, release chan struct{}
	once             *sync.Once
}

func (b blockAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= b.offset {
		b.once.Do(func() { close(b.reached) })
		<-b.release
	}
	return b.ReaderAt.ReadAt(p, off)
}

func TestReceive_ASecondSenderWhileOneCopies_IsRefusedAndTheFirstCopyCompletes(t *testing.T) {
	v := newVolume(t, 2<<20)
	r := v.receiver(t, "move-1")
	first := v.sender("move-1", zcs)
	reached, release := make(chan struct{}), make(chan struct{})
	first.Source = blockAt{ReaderAt: v.srcF, offset: 1 << 20, reached: reached, release: release, once: &sync.Once{}}
	done := make(chan outcome, 1)
	go func() { done <- run(t, t.Context(), first, r, plain, plain, nil) }()
	<-reached

	second := run(t, t.Context(), v.sender("move-1", zcs), r, plain, plain, nil)
	const want = "the receiver refused the transfer: another copy into this target is in progress"
	if second.sendErr == nil || !strings.Contains(second.sendErr.Error(), want) {
		t.Fatalf("second sender: %v, want %q", second.sendErr, want)
	}
	if !errors.Is(second.recvErr, blockcopy.ErrBusy) {
		t.Fatalf("second receive: %v, want ErrBusy", second.recvErr)
	}
	close(release)
	o := <-done
	if o.sendErr != nil || o.recvErr != nil {
		t.Fatalf("first copy: sender %v, receiver %v", o.sendErr, o.recvErr)
	}
	if got := sha256File(t, v.dst, v.size); got != v.sum {
		t.Fatalf("target SHA-256 %s, source %s", got, v.sum)
	}
}

// countingProgress counts a receiver's Saves.
type countingProgress struct {
	blockcopy.FileProgress
	saves atomic.Int64
}

func (c *countingProgress) Save(p blockcopy.Progress) error {
	c.saves.Add(1)
	return c.FileProgress.Save(p)
}

// A receiver given no SyncEvery and no SpaceCheckEvery takes the defaults (64 MiB between syncs, 128 MiB
// between space checks), not "after every chunk": a 4 MiB copy records its progress and asks for space a
// handful of times, not once per chunk.
func TestReceive_UnsetIntervals_TakeTheDefaults(t *testing.T) {
	v := newVolume(t, 4<<20)
	r := v.receiver(t, "move-1")
	p := &countingProgress{FileProgress: blockcopy.FileProgress{Path: v.progress}}
	c := &countingCheck{}
	r.Progress, r.SyncEvery, r.SpaceCheck, r.SpaceCheckEvery = p, 0, c.check, 0
	o := run(t, t.Context(), v.sender("move-1", zcs), r, plain, plain, nil)
	if o.sendErr != nil || o.recvErr != nil {
		t.Fatalf("copy failed: sender %v, receiver %v", o.sendErr, o.recvErr)
	}
	if got := p.saves.Load(); got > 2 {
		t.Errorf("progress recorded %d times for 64 chunks with SyncEvery unset; want at most 2 (at the end of the copy and with the verdict)", got)
	}
	if got := c.calls.Load(); got != 1 {
		t.Errorf("space checked %d times for 4 MiB with SpaceCheckEvery unset; want 1 (at the start only: the default is every 128 MiB)", got)
	}
}

// A progress record left by another transfer on the same target (an earlier move's, finished or not) is no
// high-water mark for this one, even when its size and chunk size are the same: this copy starts at chunk 0
// and writes everything. Resuming from it would keep the earlier move's data and call it verified.
func TestReceive_AnotherTransfersProgress_IsNotResumed(t *testing.T) {
	v := newVolume(t, 1<<20)
	n := uint64((1 << 20) / zcs)
	if err := (blockcopy.FileProgress{Path: v.progress}).Save(blockcopy.Progress{
		TransferID: "move-0", Size: v.size, ChunkSize: zcs, NextChunk: n, SHA256: v.sum}); err != nil {
		t.Fatal(err)
	}
	o := run(t, t.Context(), v.sender("move-1", zcs), v.receiver(t, "move-1"), plain, plain, nil)
	if o.sendErr != nil || o.recvErr != nil {
		t.Fatalf("copy failed: sender %v, receiver %v", o.sendErr, o.recvErr)
	}
	if o.recv.Skipped != 0 || o.recv.BytesWritten != v.size {
		t.Errorf("receiver skipped %d chunks and wrote %d bytes; want 0 skipped and all %d bytes written (the record was move-0's)", o.recv.Skipped, o.recv.BytesWritten, v.size)
	}
	if got := sha256File(t, v.dst, v.size); got != v.sum {
		t.Errorf("target digest %s, source %s", got, v.sum)
	}
}
