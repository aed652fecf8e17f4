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
	"time"

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
	Clock       clock.PassiveClock
}

// Receive serves the move's copy into targetVolume until one attempt succeeds or ctx ends. It accepts
// only the source node's certificate; a failed attempt is reported and the next one resumes.
func (r *Runner) Receive(ctx context.Context, targetVolume string, in ReceiveInstruction) error {
	dev, size, err := r.Devices.Open(targetVolume, true)
	if err != nil {
		return r.fail(ctx, targetVolume, in.MoveID, fmt.Errorf("open the target volume: %w", err))
	}
	defer dev.Close()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(r.ListenHost, strconv.Itoa(r.ListenPort)))
	if err != nil {
		return r.fail(ctx, targetVolume, in.MoveID, fmt.Errorf("listen for the copy: %w", err))
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer ln.Close()
	if err := r.Reporter.Annotate(ctx, targetVolume, AnnotationReceiver, report(in.MoveID, ln.Addr().String())); err != nil {
		return err
	}
	// A new attempt listens: an error of an earlier one is history (best effort).
	_ = r.Reporter.Annotate(ctx, targetVolume, move.AnnotationCopyError, "")
	rc := &blockcopy.Receiver{Target: dev, TargetSize: size, TransferID: in.MoveID,
		Progress: blockcopy.FileProgress{Path: filepath.Join(r.ProgressDir, in.MoveID+".json")}, IdleTimeout: r.IdleTimeout, Clock: r.Clock,
		OnProgress: func(next, total uint64) {
			// Best effort: the mark itself is on the node's disk; the annotation is for the user's status.
			_ = r.Reporter.Annotate(ctx, targetVolume, move.AnnotationProgress, fmt.Sprintf("%d/%d", next, total))
		}}
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return r.fail(ctx, targetVolume, in.MoveID, fmt.Errorf("accept the copy: %w", err))
		}
		conn := tls.Server(c, r.Identity.ServerConfig(in.SourceNode))
		stats, err := rc.Receive(ctx, conn)
		conn.Close()
		if err == nil {
			_ = r.Reporter.Annotate(ctx, targetVolume, move.AnnotationCopyError, "")
			return r.Reporter.Annotate(ctx, targetVolume, move.AnnotationSHA256, report(in.MoveID, stats.SHA256))
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		// Reported, then the next attempt (the sender retries) resumes at the high-water mark.
		if rerr := r.Reporter.Annotate(ctx, targetVolume, move.AnnotationCopyError, report(in.MoveID, err.Error())); rerr != nil {
			return errors.Join(err, rerr)
		}
	}
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
	defer conn.Close()
	// The receiver answered: an error of an earlier attempt is history (best effort).
	_ = r.Reporter.Annotate(ctx, sourceVolume, move.AnnotationCopyError, "")
	s := &blockcopy.Sender{Source: dev, Size: size, TransferID: in.MoveID, ChunkSize: r.ChunkSize, IdleTimeout: r.IdleTimeout, Clock: r.Clock}
	stats, err := s.Send(ctx, conn)
	if err != nil {
		return r.fail(ctx, sourceVolume, in.MoveID, err)
	}
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
	return file, size, nil
}

var _ Devices = FileDevices{}
