package blockcopy_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/lvms-dev/lvms/nodeagent/blockcopy"
	"github.com/lvms-dev/lvms/nodeagent/loopdev"
	"github.com/lvms-dev/lvms/operator/transferca"
)

// receiverEnv, when set, makes the test binary a receiver process (see TestMain): the loop-device test
// starts it and kills it with SIGKILL mid-copy, as a node agent that dies would be.
const receiverEnv = "LVMS_BLOCKCOPY_RECEIVER"

// receiverConfig is what the receiver process gets, as JSON in receiverEnv.
type receiverConfig struct {
	Device, Progress, AddrFile string
	Key, Cert, CA              []byte
	SyncEvery                  int64
}

func TestMain(m *testing.M) {
	if cfg := os.Getenv(receiverEnv); cfg != "" {
		if err := receiverProcess(cfg); err != nil {
			fmt.Fprintln(os.Stderr, "receiver:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// receiverProcess is node-b's agent receiving one transfer from node-a on a loop device.
func receiverProcess(raw string) error {
	var cfg receiverConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		return err
	}
	id, err := blockcopy.LoadIdentity("node-b", cfg.Key, cfg.Cert, cfg.CA, clocktesting.NewFakePassiveClock(certTime))
	if err != nil {
		return err
	}
	dev, err := os.OpenFile(cfg.Device, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer dev.Close()
	devSize, err := dev.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	if err := os.WriteFile(cfg.AddrFile+".tmp", []byte(ln.Addr().String()), 0o600); err != nil {
		return err
	}
	if err := os.Rename(cfg.AddrFile+".tmp", cfg.AddrFile); err != nil {
		return err
	}
	c, err := ln.Accept()
	if err != nil {
		return err
	}
	conn := tls.Server(c, id.ServerConfig("node-a"))
	defer conn.Close()
	r := &blockcopy.Receiver{Target: dev, TargetSize: devSize, TransferID: "move-loop",
		Progress: blockcopy.FileProgress{Path: cfg.Progress}, SyncEvery: cfg.SyncEvery, Clock: clock.RealClock{}}
	_, err = r.Receive(context.Background(), conn)
	return err
}

// startReceiver starts a receiver process and returns it with its address; the process is killed when
// the test ends if it still runs.
func startReceiver(t *testing.T, cfg receiverConfig) (*exec.Cmd, string) {
	t.Helper()
	_ = os.Remove(cfg.AddrFile)
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hung receiver is killed
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), receiverEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	for range 3000 {
		if b, err := os.ReadFile(cfg.AddrFile); err == nil {
			return cmd, string(b)
		}
		if cmd.ProcessState != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the receiver process never listened")
	return nil, ""
}

// killAt is a source that kills the receiver process with SIGKILL once the sender reads at or beyond
// offset.
type killAt struct {
	io.ReaderAt
	offset int64
	proc   *os.Process
	once   *sync.Once
}

func (k killAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= k.offset {
		k.once.Do(func() { _ = k.proc.Kill() })
	}
	return k.ReaderAt.ReadAt(p, off)
}

func TestCopy_LoopDevices_ReceiverKilled_ResumesAndChecksumsMatch(t *testing.T) {
	loopdev.RequireRoot(t)
	const size = 128 << 20
	dir := loopdev.Dir(t)
	srcDev := loopdev.Attach(t, dir, size, false)
	dstDev := loopdev.Attach(t, dir, size+4<<20, false) // an LV rounded up to whole extents
	src := open(t, srcDev, os.O_RDWR)
	writeRandom(t, src, size, 128)
	if err := src.Sync(); err != nil {
		t.Fatal(err)
	}

	p := newPKI(t)
	a := p.identity(t, "node-a")
	keyPEM, csrPEM, err := blockcopy.NewKeyAndRequest("node-b")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _, err := p.ca.Sign(transferca.Request{CSR: csrPEM, Username: agentUser, Extra: map[string][]string{transferca.NodeNameExtra: {"node-b"}}}, agentUser)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _, err := p.ca.PEM()
	if err != nil {
		t.Fatal(err)
	}
	cfg := receiverConfig{Device: dstDev, Progress: filepath.Join(t.TempDir(), "progress.json"),
		AddrFile: filepath.Join(t.TempDir(), "addr"), Key: keyPEM, Cert: certPEM, CA: caPEM, SyncEvery: 8 << 20}

	send := func(source io.ReaderAt, addr string) (blockcopy.Stats, error) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return blockcopy.Stats{}, err
		}
		conn := tls.Client(c, a.ClientConfig("node-b"))
		defer conn.Close()
		s := &blockcopy.Sender{Source: source, Size: size, TransferID: "move-loop", ChunkSize: 1 << 20, IdleTimeout: time.Minute, Clock: clock.RealClock{}}
		return s.Send(t.Context(), conn)
	}

	// First attempt: the receiving agent dies (SIGKILL) when the sender is 80 MiB in.
	cmd, addr := startReceiver(t, cfg)
	_, err = send(killAt{ReaderAt: src, offset: 80 << 20, proc: cmd.Process, once: &sync.Once{}}, addr)
	if err == nil {
		t.Fatal("the copy reported success although its receiver was killed")
	}
	werr := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(werr, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the receiver was not killed mid-copy: %v", werr)
	}
	mark, err := blockcopy.FileProgress{Path: cfg.Progress}.Load()
	if err != nil {
		t.Fatal(err)
	}
	if mark.NextChunk == 0 || mark.NextChunk >= 128 {
		t.Fatalf("high-water mark after the kill: chunk %d of 128, want between 1 and 127", mark.NextChunk)
	}
	t.Logf("killed at the sender's 80 MiB; the receiver had synced %d MiB", mark.NextChunk)

	// Second attempt: a new receiver resumes at the mark; the whole volume is verified.
	cmd, addr = startReceiver(t, cfg)
	stats, err := send(src, addr)
	if err != nil {
		t.Fatalf("resumed copy: %v", err)
	}
	if werr := cmd.Wait(); werr != nil {
		t.Fatalf("receiver process: %v", werr)
	}
	if stats.Skipped != mark.NextChunk || stats.BytesSent != int64(128-mark.NextChunk)<<20 {
		t.Errorf("resumed copy skipped %d chunks and sent %d bytes, want %d skipped", stats.Skipped, stats.BytesSent, mark.NextChunk)
	}
	srcSum, dstSum := sha256File(t, srcDev, size), sha256File(t, dstDev, size)
	if srcSum != dstSum || stats.SHA256 != srcSum {
		t.Fatalf("SHA-256 of %s %s, of %s %s, reported %s", srcDev, srcSum, dstDev, dstSum, stats.SHA256)
	}
}
