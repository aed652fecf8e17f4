package blockcopy_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"k8s.io/utils/clock"

	"github.com/lvms-dev/lvms/benchsmoke"
	"github.com/lvms-dev/lvms/nodeagent/blockcopy"
)

// BenchmarkCopy_MutualTLS copies a 64 MiB file to another over loopback TCP with mutual TLS 1.3, per-chunk
// CRC-32C, the sender's SHA-256 and the receiver's read-back SHA-256: the engine's throughput without
// the disks' (both files sit in the page cache). MB/s is of the volume copied. Under make test's smoke
// (benchsmoke), 4 MiB.
func BenchmarkCopy_MutualTLS(b *testing.B) {
	size := int64(benchsmoke.Size(64<<20, 4<<20))
	p := newPKI(b)
	a, n := p.identity(b, "node-a"), p.identity(b, "node-b")
	dir := b.TempDir()
	src, _ := randomFile(b, dir, size, 1)
	dst := emptyFile(b, dir, "target.img", size)
	srcF, dstF := open(b, src, os.O_RDONLY), open(b, dst, os.O_RDWR)
	b.SetBytes(size)
	b.ResetTimer()
	for i := range b.N {
		id := "bench-" + strconv.Itoa(i)
		s := &blockcopy.Sender{Source: srcF, Size: size, TransferID: id, Clock: clock.RealClock{}}
		r := &blockcopy.Receiver{Target: dstF, TargetSize: size, TransferID: id,
			Progress: blockcopy.FileProgress{Path: filepath.Join(dir, "progress.json")}, Clock: clock.RealClock{}}
		o := run(b, b.Context(), s, r, tlsClient(a.ClientConfig("node-b")), tlsServer(n.ServerConfig("node-a")), nil)
		if o.sendErr != nil || o.recvErr != nil {
			b.Fatalf("sender %v, receiver %v", o.sendErr, o.recvErr)
		}
	}
}
