package transfer_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/lvms-dev/lvms/api/move"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/vm"
	"github.com/lvms-dev/lvms/nodeagent/blockcopy"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/transfer"
	"github.com/lvms-dev/lvms/operator/transferca"
)

// Guest environment of TestVMMoveVolume.
const (
	envKey  = "LVMS_MOVE_KEY"
	envCert = "LVMS_MOVE_CERT"
	envCA   = "LVMS_MOVE_CA"
	envPeer = "LVMS_MOVE_PEER" // the receiver's address as the sender reaches it
	vmPort  = 9443
	// Sizes are small because every byte crosses software emulation (about 2 MB/s here): the copy is still
	// 256 chunks, so the cancelled attempt and the resume are each many chunks.
	lvSize = 256 << 20
	// The thin pool beside the LV, and the thin volumes in it.
	poolSize = 256 << 20
	thinSize = 128 << 20
)

var vmCertTime = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

// TestVMMoveVolume moves a 256 MiB logical volume with an ext4 file system and files from VM a (node-a) to
// VM b (node-b), through the node agents' transfer runners over mutual TLS with certificates from the
// operator's transfer CA: the first attempt is cancelled half-way, the second resumes at the receiver's
// high-water mark; both agents report the same SHA-256 of the whole volume, the files on b hash as they
// did on a, and the source LV on a is untouched. (The whole move, operator and agents wired: e2e/sharedvm
// TestVMMovePVC.)
//
// Then, on the same VMs, a thin volume (128 MiB, 8 MiB written) is moved to a thin volume that holds 4
// MiB of stale data where the source is zero: the target's pool (read with lvs, as the agent does) first
// refuses the copy at a 0.5% data threshold with the reason, then takes it; the target's thin LV allocates
// about the source's data, the stale range reads zero, the digests are equal. A receive that writes zeros
// as before (no Pools) into another thin LV shows what a move allocated without this.
func TestVMMoveVolume(t *testing.T) {
	if vm.InGuest() {
		switch vm.Role() {
		case "a":
			guestSource(t)
		case "b":
			guestTarget(t)
		}
		return
	}
	clk := clocktesting.NewFakePassiveClock(vmCertTime)
	ca, err := transferca.New(clk)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _, _ := ca.PEM()
	creds := func(node string) map[string]string {
		key, csr, err := blockcopy.NewKeyAndRequest(node)
		if err != nil {
			t.Fatal(err)
		}
		cert, _, err := ca.Sign(transferca.Request{CSR: csr, Username: "agent", Extra: map[string][]string{transferca.NodeNameExtra: {node}}}, "agent")
		if err != nil {
			t.Fatal(err)
		}
		return map[string]string{envKey: string(key), envCert: string(cert), envCA: string(caPEM)}
	}
	relay := vm.FreeHostAddr(t)
	netA := &vm.Network{Subnet: netip.MustParsePrefix("10.200.41.0/24"), ToHost: []vm.Forward{{GuestPort: vmPort, HostAddr: relay}}}
	netB := &vm.Network{Subnet: netip.MustParsePrefix("10.200.42.0/24"), FromHost: []vm.Forward{{GuestPort: vmPort, HostAddr: relay}}}
	envA := creds("node-a")
	envA[envPeer] = fmt.Sprintf("%s:%d", netA.HostSide(), vmPort)
	vm.RunMany(t, []vm.Options{
		{Name: "a", Network: netA, Disks: []vm.Disk{{Size: lvSize + poolSize + 256<<20}}, MemoryMiB: 768, Timeout: 25 * time.Minute, Env: envA},
		{Name: "b", Network: netB, Disks: []vm.Disk{{Size: lvSize + poolSize + 256<<20}}, MemoryMiB: 768, Timeout: 25 * time.Minute, Env: creds("node-b")},
	})
}

// run runs a guest command with a timeout that kills it, failing the test when it fails.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// guestLV makes volume group vg0 on the VM's disk and an lvSize LV in it.
func guestLV(t *testing.T, name string) string {
	t.Helper()
	disks, err := vm.Disks()
	if err != nil || len(disks) != 1 {
		t.Fatalf("disks %v: %v", disks, err)
	}
	run(t, "pvcreate", disks[0])
	run(t, "vgcreate", "vg0", disks[0])
	run(t, "lvcreate", "-y", "-L", fmt.Sprintf("%db", lvSize), "-n", name, "vg0")
	return "/dev/vg0/" + name
}

func guestIdentity(t *testing.T, node string) *blockcopy.Identity {
	t.Helper()
	id, err := blockcopy.LoadIdentity(node, []byte(os.Getenv(envKey)), []byte(os.Getenv(envCert)), []byte(os.Getenv(envCA)), clocktesting.NewFakePassiveClock(vmCertTime))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// fileAnnotations keeps the agents' annotations as files in the VMs' shared directory (the API server's
// part here).
type fileAnnotations struct{ mu sync.Mutex }

func (f *fileAnnotations) path(lv, key string) string {
	return filepath.Join(vm.SharedDir(), "ann-"+lv+"-"+strings.ReplaceAll(key, "/", "_"))
}

func (f *fileAnnotations) Annotate(_ context.Context, lv, key, value string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if value == "" {
		err := os.Remove(f.path(lv, key))
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	return os.WriteFile(f.path(lv, key), []byte(value), 0o644)
}

func (f *fileAnnotations) get(lv, key string) string {
	b, _ := os.ReadFile(f.path(lv, key))
	return string(b)
}

// fixedAddress is where the sender reaches the receiver: the host relay into VM b.
type fixedAddress string

func (a fixedAddress) ReceiverAddress(context.Context, string, string) (string, error) {
	return string(a), nil
}

// cancelDevices opens LVs by path and cancels a context once the copy read past half the volume.
type cancelDevices struct {
	paths  map[string]string
	cancel func()
}

func (d cancelDevices) Open(lv string, write bool) (transfer.Device, int64, error) {
	dev, size, err := transfer.FileDevices{Resolve: func(lv string) (string, error) { return d.paths[lv], nil }}.Open(lv, write)
	if err != nil || d.cancel == nil {
		return dev, size, err
	}
	return cancelAt{Device: dev, at: size / 2, cancel: d.cancel}, size, nil
}

type cancelAt struct {
	transfer.Device
	at     int64
	cancel func()
}

func (c cancelAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= c.at {
		c.cancel()
	}
	return c.Device.ReadAt(p, off)
}

const moveID = "00112233aabbccdd"

// guestSource is node-a: an ext4 volume with files, sent twice (cancelled half-way, then resumed).
func guestSource(t *testing.T) {
	dev := guestLV(t, "src")
	run(t, "mkfs.ext4", "-q", dev)
	dir := t.TempDir()
	run(t, "mount", dev, dir)
	sums := map[string]string{}
	rng := rand.NewChaCha8([32]byte{42})
	for i := range 24 {
		b := make([]byte, (i%6+1)<<20) // 1 to 6 MiB each, 84 MiB in all
		_, _ = rng.Read(b)
		name := fmt.Sprintf("file-%02d", i)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		sums[name] = hex.EncodeToString(s[:])
	}
	run(t, "umount", dir)
	manifest, _ := json.Marshal(sums)
	if err := os.WriteFile(filepath.Join(vm.SharedDir(), "manifest.json"), manifest, 0o644); err != nil {
		t.Fatal(err)
	}
	before := sha256Dev(t, dev)

	vm.WaitSignal(t, "receiving")
	ann := &fileAnnotations{}
	in := transfer.SendInstruction{TargetNode: "node-b", TargetVolume: "dst", MoveID: moveID}
	id := guestIdentity(t, "node-a")
	ctx, cancel := context.WithCancel(t.Context())
	r := &transfer.Runner{Identity: id, Devices: cancelDevices{paths: map[string]string{"src": dev}, cancel: cancel}, Reporter: ann,
		Addresses: fixedAddress(os.Getenv(envPeer)), ProgressDir: t.TempDir(), IdleTimeout: 5 * time.Minute, Clock: clock.RealClock{}}
	start := time.Now()
	if err := r.Send(ctx, "src", in); err == nil {
		t.Fatal("the first attempt was not cancelled")
	}
	t.Logf("first attempt cancelled half-way after %s", time.Since(start).Round(time.Second))
	vm.Signal(t, "first-attempt-done")
	vm.WaitSignal(t, "receiver-ready-again")
	r.Devices = cancelDevices{paths: map[string]string{"src": dev}}
	start = time.Now()
	if err := r.Send(t.Context(), "src", in); err != nil {
		t.Fatal(err)
	}
	t.Logf("resumed attempt finished after %s", time.Since(start).Round(time.Second))
	if got, want := ann.get("src", move.AnnotationSHA256), moveID+":"+before; got != want {
		t.Fatalf("source agent reported %q, want %q (the SHA-256 of /dev/vg0/src)", got, want)
	}
	vm.Signal(t, "sent")
	vm.WaitSignal(t, "verified")
	// The source stays as it was: nothing released it.
	if after := sha256Dev(t, dev); after != before {
		t.Fatalf("the source LV changed during the move: %s, was %s", after, before)
	}
	t.Logf("source /dev/vg0/src kept, SHA-256 %s", before)
	thinSource(t, r)
}

// guestTarget is node-b: it receives into a new lvSize LV and checks the files.
func guestTarget(t *testing.T) {
	dev := guestLV(t, "dst")
	ann := &fileAnnotations{}
	progress := t.TempDir()
	r := &transfer.Runner{Identity: guestIdentity(t, "node-b"), Devices: transfer.FileDevices{Resolve: func(string) (string, error) { return dev, nil }},
		Reporter: ann, ListenPort: vmPort, ProgressDir: progress, IdleTimeout: 5 * time.Minute, Clock: clock.RealClock{}}
	done := make(chan error, 1)
	go func() {
		done <- r.Receive(t.Context(), "dst", transfer.ReceiveInstruction{SourceNode: "node-a", SourceVolume: "src", MoveID: moveID})
	}()
	waitGuest(t, "the receiver's address", func() bool { return ann.get("dst", transfer.AnnotationReceiver) != "" })
	vm.Signal(t, "receiving")

	// The sender's first attempt is cancelled half-way: the receiver reports it and keeps listening.
	vm.WaitSignal(t, "first-attempt-done")
	waitGuest(t, "the failed attempt's report", func() bool { return ann.get("dst", move.AnnotationCopyError) != "" })
	mark, err := blockcopy.FileProgress{Path: filepath.Join(progress, moveID+".json")}.Load()
	if err != nil || mark.NextChunk == 0 || mark.NextChunk >= 1024 {
		t.Fatalf("high-water mark after the cancelled attempt: chunk %d of 1024 (%v)", mark.NextChunk, err)
	}
	t.Logf("after the cancelled attempt the receiver has %d MiB synced; reported: %s", mark.NextChunk, ann.get("dst", move.AnnotationCopyError))
	vm.Signal(t, "receiver-ready-again")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	vm.WaitSignal(t, "sent")
	want := sha256Dev(t, dev)
	if got := ann.get("dst", move.AnnotationSHA256); got != moveID+":"+want {
		t.Fatalf("target agent reported %q, want the SHA-256 of /dev/vg0/dst %s", got, want)
	}
	manifest, err := os.ReadFile(filepath.Join(vm.SharedDir(), "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sums map[string]string
	if err := json.Unmarshal(manifest, &sums); err != nil {
		t.Fatal(err)
	}
	run(t, "fsck.ext4", "-n", "-f", dev)
	dir := t.TempDir()
	run(t, "mount", dev, dir)
	defer run(t, "umount", dir)
	for name, s := range sums {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != s {
			t.Fatalf("%s on node-b has SHA-256 %x, on node-a it had %s", name, got, s)
		}
	}
	t.Logf("all %d files on node-b hash as on node-a; volume SHA-256 %s", len(sums), want)
	vm.Signal(t, "verified")
	thinTarget(t)
}

// waitGuest polls cond for up to 10 minutes.
func waitGuest(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 6000 {
		if cond() {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("never saw %s", what)
}

func sha256Dev(t *testing.T, dev string) string {
	t.Helper()
	return sha256Size(t, dev, lvSize)
}

func sha256Size(t *testing.T, dev string, size int64) string {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if n, err := io.Copy(h, io.LimitReader(f, size)); err != nil || n != size {
		t.Fatalf("read %s: %d bytes, %v", dev, n, err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Moves of the thin part: refused by the pool's threshold, copied, copied as before (zeros written).
const (
	thinMoveID   = "00112233aabbccee"
	asBeforeID   = "00112233aabbccff"
	staleOffset  = 64 << 20 // the target's stale data, where the source is zero
	staleSize    = 4 << 20
	thinWritten  = 8 << 20 // the source's data: 4 MiB at 0 and at 100 MiB
	thinPoolName = "pool0"
)

// thinPool makes pool0 in vg0 and the thin LVs names in it.
func thinPool(t *testing.T, names ...string) {
	t.Helper()
	run(t, "lvcreate", "-y", "--type", "thin-pool", "-L", fmt.Sprintf("%db", poolSize), "-n", thinPoolName, "vg0")
	for _, n := range names {
		run(t, "lvcreate", "-y", "--thin", "-V", fmt.Sprintf("%db", thinSize), "-n", n, "vg0/"+thinPoolName)
	}
}

// writeRandom writes n random bytes at off of dev, past the page cache.
func writeRandom(t *testing.T, dev string, off, n int64, seed byte) {
	t.Helper()
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{seed}).Read(b)
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// allocation is how many bytes of each LV of vg0 (and of the pool) are allocated: lvs' data_percent of
// its size.
func allocation(t *testing.T) map[string]int64 {
	t.Helper()
	out := run(t, "lvs", "--reportformat", "json", "--units", "b", "--nosuffix", "-o", "lv_name,lv_size,data_percent", "vg0")
	var rep struct {
		Report []struct {
			LV []struct {
				Name string `json:"lv_name"`
				Size string `json:"lv_size"`
				Data string `json:"data_percent"`
			} `json:"lv"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("lvs: %v: %s", err, out)
	}
	m := map[string]int64{}
	for _, lv := range rep.Report[0].LV {
		if lv.Data == "" {
			continue
		}
		var size int64
		var pct float64
		if _, err := fmt.Sscan(lv.Size, &size); err != nil {
			t.Fatalf("lvs size %q: %v", lv.Size, err)
		}
		if _, err := fmt.Sscan(lv.Data, &pct); err != nil {
			t.Fatalf("lvs data_percent %q: %v", lv.Data, err)
		}
		m[lv.Name] = int64(float64(size) * pct / 100)
	}
	return m
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// thinSource is node-a's thin part: a thin volume with 8 MiB written, sent three times.
func thinSource(t *testing.T, r *transfer.Runner) {
	thinPool(t, "tsrc")
	dev := "/dev/vg0/tsrc"
	writeRandom(t, dev, 0, 4<<20, 1)
	writeRandom(t, dev, 100<<20, 4<<20, 2)
	sum := sha256Size(t, dev, thinSize)
	if err := os.WriteFile(filepath.Join(vm.SharedDir(), "thin-sum"), []byte(sum), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("thin source /dev/vg0/tsrc: %s of %s allocated", mib(allocation(t)["tsrc"]), mib(thinSize))
	r.Devices = cancelDevices{paths: map[string]string{"tsrc": dev}}
	send := func(id string) error {
		return r.Send(t.Context(), "tsrc", transfer.SendInstruction{TargetNode: "node-b", TargetVolume: "tdst", MoveID: id})
	}

	vm.WaitSignal(t, "thin-receiving-low-threshold")
	err := send(thinMoveID)
	if err == nil || !strings.Contains(err.Error(), "at or past the device class's data usage threshold of 0.5%") {
		t.Fatalf("sending into a pool past its threshold: %v, want the receiver's refusal naming the threshold", err)
	}
	t.Logf("refused by the target's pool: %v", err)
	vm.Signal(t, "thin-refused")

	vm.WaitSignal(t, "thin-receiving")
	start := time.Now()
	if err := send(thinMoveID); err != nil {
		t.Fatal(err)
	}
	t.Logf("thin volume sent in %s", time.Since(start).Round(time.Second))
	vm.Signal(t, "thin-sent")

	vm.WaitSignal(t, "as-before-receiving")
	if err := send(asBeforeID); err != nil {
		t.Fatal(err)
	}
	vm.Signal(t, "as-before-sent")
	vm.WaitSignal(t, "thin-verified")
}

// thinTarget is node-b's thin part.
func thinTarget(t *testing.T) {
	thinPool(t, "tdst", "tasbefore")
	dev, asBefore := "/dev/vg0/tdst", "/dev/vg0/tasbefore"
	writeRandom(t, dev, staleOffset, staleSize, 3)
	before := allocation(t)
	t.Logf("thin target before the move: tdst %s allocated (the stale data), pool %s of %s", mib(before["tdst"]), mib(before[thinPoolName]), mib(poolSize))

	scheme := runtime.NewScheme()
	if err := topolvmv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	lvs := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: "tdst"}, Spec: topolvmv1.LogicalVolumeSpec{NodeName: "node-b", DeviceClass: "thin"}}).Build()
	threshold := 0.5 // the stale 4 MiB alone are 1.6% of the pool
	cfg := &lvmd.Config{DeviceClasses: []lvmd.DeviceClass{{Name: "thin", VolumeGroup: "vg0", Type: lvmd.TypeThin,
		ThinPool: &lvmd.ThinPoolConfig{Name: thinPoolName, OverprovisionRatio: 2, DataUsageThreshold: &threshold}}}}
	ann := &fileAnnotations{}
	logger := funcr.New(func(prefix, args string) { t.Log(prefix, args) }, funcr.Options{})
	receive := func(lv, path, id string, pools transfer.Pools) (*transfer.Runner, chan error, context.CancelFunc) {
		r := &transfer.Runner{Identity: guestIdentity(t, "node-b"), Devices: transfer.FileDevices{Resolve: func(string) (string, error) { return path, nil }},
			Reporter: ann, ListenPort: vmPort, ProgressDir: t.TempDir(), IdleTimeout: 5 * time.Minute, Clock: clock.RealClock{}, Pools: pools,
			PoolCheckEvery: 2 << 20}
		ctx, cancel := context.WithCancel(logr.NewContext(t.Context(), logger))
		if err := ann.Annotate(ctx, lv, transfer.AnnotationReceiver, ""); err != nil { // an earlier receive's
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			done <- r.Receive(ctx, lv, transfer.ReceiveInstruction{SourceNode: "node-a", SourceVolume: "tsrc", MoveID: id})
		}()
		waitGuest(t, "the receiver's address", func() bool { return strings.HasPrefix(ann.get(lv, transfer.AnnotationReceiver), id+":") })
		return r, done, cancel
	}
	pools := transfer.LVMPools{Reader: lvs, NodeName: "node-b", LVM: lvm.Runner{},
		ThinPoolOf: transfer.LVMDThinPools(func() (*lvmd.Config, error) { return cfg, nil })}

	// 1. The pool is past the class's threshold (0.5%): the copy is refused before anything is written.
	_, done, cancel := receive("tdst", dev, thinMoveID, pools)
	vm.Signal(t, "thin-receiving-low-threshold")
	vm.WaitSignal(t, "thin-refused")
	waitGuest(t, "the pool's refusal on the target", func() bool {
		return strings.Contains(ann.get("tdst", move.AnnotationCopyError), "at or past the device class's data usage threshold of 0.5%")
	})
	t.Logf("reported on the target: %s", ann.get("tdst", move.AnnotationCopyError))
	cancel()
	<-done

	// 2. With the default threshold the thin copy goes through.
	threshold = lvmd.DefaultDataUsageThreshold
	_, done, cancel = receive("tdst", dev, thinMoveID, pools)
	defer cancel()
	vm.Signal(t, "thin-receiving")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	vm.WaitSignal(t, "thin-sent")
	want, err := os.ReadFile(filepath.Join(vm.SharedDir(), "thin-sum"))
	if err != nil {
		t.Fatal(err)
	}
	if got := sha256Size(t, dev, thinSize); got != string(want) {
		t.Fatalf("thin target SHA-256 %s, source %s", got, want)
	}
	if got := ann.get("tdst", move.AnnotationSHA256); got != thinMoveID+":"+string(want) {
		t.Fatalf("target agent reported %q, want the source's SHA-256 %s", got, want)
	}
	stale := make([]byte, staleSize)
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.ReadAt(stale, staleOffset)
	f.Close()
	if err != nil || !bytes.Equal(stale, make([]byte, staleSize)) {
		t.Fatalf("the stale range of the target is not zero after the move (%v)", err)
	}
	after := allocation(t)
	t.Logf("thin move: tdst %s allocated of %s (source data %s), pool grew by %s (%s -> %s)", mib(after["tdst"]), mib(thinSize), mib(thinWritten),
		mib(after[thinPoolName]-before[thinPoolName]), mib(before[thinPoolName]), mib(after[thinPoolName]))
	if after["tdst"] > thinWritten+2<<20 {
		t.Errorf("the thin target has %s allocated, want about the source's %s of data, not its %s", mib(after["tdst"]), mib(thinWritten), mib(thinSize))
	}

	// 3. As before: zeros written (no Pools), into another thin LV of the same pool.
	_, done, cancel = receive("tasbefore", asBefore, asBeforeID, nil)
	defer cancel()
	vm.Signal(t, "as-before-receiving")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	vm.WaitSignal(t, "as-before-sent")
	old := allocation(t)
	t.Logf("as before (zeros written): tasbefore %s allocated of %s, pool grew by %s", mib(old["tasbefore"]), mib(thinSize), mib(old[thinPoolName]-after[thinPoolName]))
	vm.Signal(t, "thin-verified")
}
