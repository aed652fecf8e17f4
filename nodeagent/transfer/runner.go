package transfer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"
	"k8s.io/utils/clock"

	"github.com/lvms-dev/lvms/api/move"
	"github.com/lvms-dev/lvms/nodeagent/blockcopy"
)

// Device is an opened logical volume.
type Device interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Close() error
}

// Devices opens the logical volume of one of this node's LogicalVolumes, with its size in bytes.
type Devices interface {
	Open(logicalVolume string, write bool) (Device, int64, error)
}

// Reporter writes an annotation on one of this node's LogicalVolumes ("" removes it).
type Reporter interface {
	Annotate(ctx context.Context, logicalVolume, key, value string) error
}

// Addresses reads the receiver address the target node's agent published for a move.
type Addresses interface {
	ReceiverAddress(ctx context.Context, targetVolume, moveID string) (string, error)
}

// Runner runs this node's side of moves.
type Runner struct {
	Identity  *blockcopy.Identity
	Devices   Devices
	Reporter  Reporter
	Addresses Addresses
	// ListenHost and ListenPort are where receivers listen (the pod's IP; port 0: any free port). The
	// address is published on the target LogicalVolume either way.
	ListenHost string
	ListenPort int
	// ProgressDir keeps each receive's high-water mark (<move ID>.json), on the node's disk.
	ProgressDir string
	// ChunkSize and IdleTimeout are passed to blockcopy (0: its defaults).
	ChunkSize   int
	IdleTimeout time.Duration
	// SyncEvery is passed to the blockcopy receiver (0: its default).
	SyncEvery int64
	Clock     clock.PassiveClock
	// MaxConnections bounds the connections a receiver serves at once, handshakes included (0:
	// DefaultMaxConnections); one more is closed at once.
	MaxConnections int
	// Pools says which targets are thin: such a target is not written where the source is zero, and its
	// copy stops once its pool passes a usage threshold (asked when the copy starts and every
	// PoolCheckEvery bytes written; 0: blockcopy.DefaultSpaceCheckEvery). nil: targets are written like
	// thick ones and no pool is watched.
	Pools          Pools
	PoolCheckEvery int64
}

// DefaultMaxConnections is how many connections a receiver serves at once when Runner.MaxConnections is 0.
const DefaultMaxConnections = 4

// Discarder is a Device that can discard a range (blockcopy.DiscardFile).
type Discarder interface {
	Discard(off, length int64) error
}

// ThinPool is the thin pool of a target volume with its device class's usage thresholds (percent).
type ThinPool struct {
	VolumeGroup, Name                string
	DataThreshold, MetadataThreshold float64
}

// Pools knows which of this node's logical volumes are thin and how full their pools are.
type Pools interface {
	// ThinPool is the pool of logicalVolume, nil for a thick volume.
	ThinPool(ctx context.Context, logicalVolume string) (*ThinPool, error)
	// Usage is a pool's data and metadata usage in percent.
	Usage(ctx context.Context, pool ThinPool) (data, metadata float64, err error)
}

// HandshakeTimeout bounds a connection's TLS handshake: a peer that has not proved who it is by
// then is dropped, so a silent connection holds a receiver's slot briefly, never the copy.
const HandshakeTimeout = 10 * time.Second

// poolCheckTimeout bounds one look at the target's thin pool (the lvm command is killed then): the
// receiver reads no frame meanwhile, and the sender waits at most its idle timeout.
const poolCheckTimeout = 30 * time.Second

// Receive serves the move's copy into targetVolume until one attempt succeeds or ctx ends. It accepts
// connections concurrently (at most MaxConnections; more are closed at once), gives each
// HandshakeTimeout to complete its TLS handshake with the source node's certificate, and lets
// one authenticated sender at a time write the target (blockcopy refuses another). A connection that
// fails its handshake is only logged, rate-limited: nothing unauthenticated writes to the API server. A
// failed attempt of the authenticated sender is reported and the next one resumes.
func (r *Runner) Receive(ctx context.Context, targetVolume string, in ReceiveInstruction) error {
	dev, size, err := r.Devices.Open(targetVolume, true)
	if err != nil {
		return r.fail(ctx, targetVolume, in.MoveID, fmt.Errorf("open the target volume: %w", err))
	}
	defer dev.Close()
	rc := &blockcopy.Receiver{Target: dev, TargetSize: size, TransferID: in.MoveID,
		Progress: blockcopy.FileProgress{Path: filepath.Join(r.ProgressDir, in.MoveID+".json")}, SyncEvery: r.SyncEvery,
		IdleTimeout: r.IdleTimeout, Clock: r.Clock,
		OnProgress: func(next, total uint64) {
			// Best effort: the mark itself is on the node's disk; the annotation is for the user's status.
			_ = r.Reporter.Annotate(ctx, targetVolume, move.AnnotationProgress, fmt.Sprintf("%d/%d", next, total))
		}}
	if err := r.thin(ctx, targetVolume, dev, rc); err != nil {
		return r.fail(ctx, targetVolume, in.MoveID, err)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(r.ListenHost, strconv.Itoa(r.ListenPort)))
	if err != nil {
		return r.fail(ctx, targetVolume, in.MoveID, fmt.Errorf("listen for the copy: %w", err))
	}
	defer ln.Close()
	if err := r.Reporter.Annotate(ctx, targetVolume, AnnotationReceiver, report(in.MoveID, ln.Addr().String())); err != nil {
		return err
	}
	// A new attempt listens: an error of an earlier one is history (best effort).
	_ = r.Reporter.Annotate(ctx, targetVolume, move.AnnotationCopyError, "")
	return r.serve(ctx, ln, rc, targetVolume, in)
}

// thin sets up rc for a thin target: zero ranges discarded rather than written, the pool watched.
func (r *Runner) thin(ctx context.Context, targetVolume string, dev Device, rc *blockcopy.Receiver) error {
	if r.Pools == nil {
		return nil
	}
	pool, err := r.Pools.ThinPool(ctx, targetVolume)
	if err != nil {
		return fmt.Errorf("find the target's thin pool: %w", err)
	}
	if pool == nil {
		// Thick: zeros are written. A discard there may reach a disk that does not promise to read
		// zeros after it, every time.
		return nil
	}
	if d, ok := dev.(Discarder); ok {
		log := logr.FromContextOrDiscard(ctx)
		var once sync.Once
		rc.Discard = func(off, length int64) error {
			err := d.Discard(off, length)
			if err != nil {
				once.Do(func() {
					log.Info("The thin target cannot discard: zeros are written where it holds stale data, which allocates them in its pool", "pool", pool.VolumeGroup+"/"+pool.Name, "reason", err.Error())
				})
			}
			return err
		}
	}
	p := *pool
	rc.SpaceCheck, rc.SpaceCheckEvery = func(ctx context.Context) error { return r.checkPool(ctx, p) }, r.PoolCheckEvery
	return nil
}

// checkPool fails when the pool is at or past one of its device class's usage thresholds.
func (r *Runner) checkPool(ctx context.Context, p ThinPool) error {
	ctx, cancel := context.WithTimeout(ctx, poolCheckTimeout)
	defer cancel()
	name := p.VolumeGroup + "/" + p.Name
	data, meta, err := r.Pools.Usage(ctx, p)
	if err != nil {
		return fmt.Errorf("read how full the target's thin pool %s is (the copy does not go on blind): %w", name, err)
	}
	for _, u := range []struct {
		kind            string
		used, threshold float64
	}{{"data", data, p.DataThreshold}, {"metadata", meta, p.MetadataThreshold}} {
		if u.used >= u.threshold {
			return fmt.Errorf("the target's thin pool %s is %.1f%% full, at or past the device class's %s usage threshold of %g%%: the copy stopped so as not to fill it; extend the pool (add a device to volume group %s) or free space in it, and the next attempt resumes where this one stopped",
				name, u.used, u.kind, u.threshold, p.VolumeGroup)
		}
	}
	return nil
}

// serve accepts connections on ln until one session succeeds, a report fails, or ctx ends.
func (r *Runner) serve(ctx context.Context, ln net.Listener, rc *blockcopy.Receiver, targetVolume string, in ReceiveInstruction) error {
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	context.AfterFunc(sctx, func() { ln.Close() })
	limit := r.MaxConnections
	if limit <= 0 {
		limit = DefaultMaxConnections
	}
	slots := semaphore.NewWeighted(int64(limit))
	refused := &limitedLog{log: logr.FromContextOrDiscard(ctx), clock: r.clock(), limit: rate.NewLimiter(rate.Every(refusedLogEvery), refusedLogBurst)}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		ended  bool
		result error
	)
	end := func(err error) {
		mu.Lock()
		if !ended {
			ended, result = true, err
		}
		mu.Unlock()
		stop()
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			if sctx.Err() == nil {
				end(r.fail(ctx, targetVolume, in.MoveID, fmt.Errorf("accept the copy: %w", err)))
			}
			break
		}
		if !slots.TryAcquire(1) {
			refused.info("Refused a connection at once: the receiver serves "+strconv.Itoa(limit)+" at a time", "remote", c.RemoteAddr().String())
			c.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer slots.Release(1)
			if final, err := r.session(sctx, c, rc, targetVolume, in, refused); final {
				end(err)
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if ended {
		return result
	}
	return context.Cause(ctx)
}

// session serves one connection: the handshake, then the copy. final says that Receive ends with err:
// the copy succeeded (err nil) or its report failed.
func (r *Runner) session(ctx context.Context, c net.Conn, rc *blockcopy.Receiver, targetVolume string, in ReceiveInstruction, refused *limitedLog) (final bool, err error) {
	defer c.Close()
	conn := tls.Server(c, r.Identity.ServerConfig(in.SourceNode))
	// The handshake is done here, bounded, rather than by the copy's first read with its idle timeout.
	if err := c.SetDeadline(r.clock().Now().Add(HandshakeTimeout)); err != nil {
		return false, nil
	}
	if err := conn.HandshakeContext(ctx); err != nil {
		if ctx.Err() == nil {
			refused.info("Refused a connection: its TLS handshake failed", "remote", c.RemoteAddr().String(), "reason", err.Error())
		}
		return false, nil
	}
	if err := c.SetDeadline(time.Time{}); err != nil {
		return false, nil
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("remote", c.RemoteAddr().String())
	stats, err := rc.Receive(ctx, conn)
	if err == nil {
		_ = r.Reporter.Annotate(ctx, targetVolume, move.AnnotationCopyError, "")
		log.Info("Received the copy", "bytesReceived", stats.BytesSent, "zeroChunks", stats.ZeroChunks,
			"bytesWritten", stats.BytesWritten, "bytesDiscarded", stats.BytesDiscarded, "chunksResumed", stats.Skipped)
		return true, r.Reporter.Annotate(ctx, targetVolume, move.AnnotationSHA256, report(in.MoveID, stats.SHA256))
	}
	if ctx.Err() != nil {
		return false, nil
	}
	if errors.Is(err, blockcopy.ErrBusy) {
		// The copy that holds the target reports for itself; this sender hears why it was refused.
		log.Info("Refused a second sender: a copy into the target is in progress")
		return false, nil
	}
	// Reported, then the next attempt (the sender retries) resumes at the high-water mark.
	log.Error(err, "The copy failed; waiting for the sender's next attempt")
	if rerr := r.Reporter.Annotate(ctx, targetVolume, move.AnnotationCopyError, report(in.MoveID, err.Error())); rerr != nil {
		return true, errors.Join(err, rerr)
	}
	return false, nil
}

func (r *Runner) clock() clock.PassiveClock {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}

// Unauthenticated connections are logged at most refusedLogBurst at once, then one per refusedLogEvery.
const (
	refusedLogBurst = 3
	refusedLogEvery = 10 * time.Second
)

// limitedLog logs through a rate limit on an injected clock, and says how many lines it left out.
type limitedLog struct {
	log   logr.Logger
	clock clock.PassiveClock
	mu    sync.Mutex
	limit *rate.Limiter
	left  int
}

func (l *limitedLog) info(msg string, kv ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.limit.AllowN(l.clock.Now(), 1) {
		l.left++
		return
	}
	if l.left > 0 {
		kv = append(kv, "notLogged", l.left)
		l.left = 0
	}
	l.log.Info(msg, kv...)
}

// Send copies sourceVolume to the target node's receiver once and reports the outcome.
func (r *Runner) Send(ctx context.Context, sourceVolume string, in SendInstruction) error {
	addr, err := r.Addresses.ReceiverAddress(ctx, in.TargetVolume, in.MoveID)
	if err != nil {
		return err
	}
	dev, size, err := r.Devices.Open(sourceVolume, false)
	if err != nil {
		return r.fail(ctx, sourceVolume, in.MoveID, fmt.Errorf("open the source volume: %w", err))
	}
	defer dev.Close()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return r.fail(ctx, sourceVolume, in.MoveID, fmt.Errorf("reach the receiver on node %s at %s: %w", in.TargetNode, addr, err))
	}
	conn := tls.Client(c, r.Identity.ClientConfig(in.TargetNode))
	// The receiver answered: an error of an earlier attempt is history (best effort).
	_ = r.Reporter.Annotate(ctx, sourceVolume, move.AnnotationCopyError, "")
	s := &blockcopy.Sender{Source: dev, Size: size, TransferID: in.MoveID, ChunkSize: r.ChunkSize, IdleTimeout: r.IdleTimeout, Clock: r.Clock}
	stats, err := s.Send(ctx, conn)
	if err != nil {
		// A send that failed or was stopped may have sent part of a TLS record: TLS's close_notify after
		// it would reach the receiver as the rest of that record ("bad record MAC", which reads like
		// tampering). Closing the TCP connection alone ends it as what it is, a sender that stopped.
		c.Close()
		return r.fail(ctx, sourceVolume, in.MoveID, err)
	}
	conn.Close()
	_ = r.Reporter.Annotate(ctx, sourceVolume, move.AnnotationCopyError, "")
	return r.Reporter.Annotate(ctx, sourceVolume, move.AnnotationSHA256, report(in.MoveID, stats.SHA256))
}

// fail reports err on the LogicalVolume and returns it.
func (r *Runner) fail(ctx context.Context, lv, id string, err error) error {
	if rerr := r.Reporter.Annotate(ctx, lv, move.AnnotationCopyError, report(id, err.Error())); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}

// FileDevices opens logical volumes as files under a directory (dir/<volume group>/<lv name> is
// /dev/<vg>/<lv>); Resolve maps a LogicalVolume's name to that path.
type FileDevices struct {
	Resolve func(logicalVolume string) (string, error)
}

// Open implements Devices.
func (f FileDevices) Open(logicalVolume string, write bool) (Device, int64, error) {
	path, err := f.Resolve(logicalVolume)
	if err != nil {
		return nil, 0, err
	}
	flag := os.O_RDONLY
	if write {
		flag = os.O_RDWR
	}
	file, err := os.OpenFile(path, flag, 0)
	if err != nil {
		return nil, 0, err
	}
	size, err := file.Seek(0, io.SeekEnd)
	if err != nil {
		file.Close()
		return nil, 0, err
	}
	return fileDevice{File: file, discard: blockcopy.DiscardFile(file)}, size, nil
}

// fileDevice is an opened device file that can discard.
type fileDevice struct {
	*os.File
	discard func(off, length int64) error
}

func (f fileDevice) Discard(off, length int64) error { return f.discard(off, length) }

var _ Devices = FileDevices{}
