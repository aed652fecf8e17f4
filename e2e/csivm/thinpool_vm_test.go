package csivm

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/tools/events"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/e2e/vm"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi/proto"
	"github.com/lvms-dev/lvms/nodeagent/metrics"
)

// TestVMThinPoolThresholds fills a 256 MiB thin pool with real writes through volumes lvmd created and
// watches what a user sees follow the pool's real use, not the over-provision ratio: the capacity lvmd,
// the node annotation and the metrics report falls as data is written; one ThinPoolNearlyFull event 10
// points before the 60 % data threshold and one ThinPoolFull at it; past it a new volume is refused with a
// message naming the pool, its use and the threshold, while the volumes already there keep their data
// and take writes.
func TestVMThinPoolThresholds(t *testing.T) {
	if !vm.InGuest() {
		t.Parallel() // one VM of one vCPU each: two at once use both host cores
		vm.Run(t, vm.Options{Disks: []vm.Disk{{Size: 1 << 30}}, MemoryMiB: 1024})
		return
	}
	disks, err := vm.Disks()
	if err != nil || len(disks) < 1 {
		t.Fatalf("disks %v, %v", disks, err)
	}
	sh(t, "pvcreate", "-y", disks[0])
	sh(t, "vgcreate", "tvg", disks[0])
	t.Cleanup(func() { _ = exec.Command("vgremove", "-y", "-f", "tvg").Run() }) // also after a failure
	// Chunk 64 KiB: usage moves in small steps; zeroing off, so only what is written is used.
	sh(t, "lvcreate", "-y", "--type", "thin-pool", "-L", "256M", "-c", "64k", "-Z", "n", "-n", "pool", "tvg")
	zero := uint64(0)
	cfg := &lvmd.Config{DeviceClasses: []lvmd.DeviceClass{{Name: "thin", VolumeGroup: "tvg", Type: lvmd.TypeThin, SpareGB: &zero,
		ThinPool: &lvmd.ThinPoolConfig{Name: "pool", OverprovisionRatio: 10, DataUsageThreshold: new(60.0)}}}}
	server := lvmdapi.NewServer(lvm.Runner{}, lvmdapi.StaticConfig(cfg))
	c, stop, err := lvmdapi.InProcess(server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	ctx := context.Background()
	names := driver.New(false)
	exporter := metrics.NewExporter(nil, nil, "vm", names)
	rec := events.NewFakeRecorder(100)
	exporter.Config, exporter.Events = lvmdapi.StaticConfig(cfg), rec

	// check is one Watch message (what the exporter gets): it returns the capacity and the pool's data
	// percent after checking that lvmd's GetFreeBytes, the Watch item and the node annotation agree, and
	// the events it raised.
	check := func(step string) (capacity uint64, data float64, raised []string) {
		t.Helper()
		msg, err := server.Capacity(ctx)
		if err != nil {
			t.Fatalf("%s: capacity: %v", step, err)
		}
		exporter.Observe(msg)
		free, err := c.GetFreeBytes(ctx, &proto.GetFreeBytesRequest{DeviceClass: "thin"})
		if err != nil {
			t.Fatalf("%s: GetFreeBytes: %v", step, err)
		}
		tp := msg.GetItems()[0].GetThinPool()
		annotation := exporter.Annotations(msg)[names.CapacityAnnotation("thin")]
		if tp.GetOverprovisionBytes() != free.FreeBytes || annotation != strconv.FormatUint(free.FreeBytes, 10) {
			t.Errorf("%s: capacity differs: GetFreeBytes %d, Watch %d, annotation %s", step, free.FreeBytes, tp.GetOverprovisionBytes(), annotation)
		}
		for {
			select {
			case e := <-rec.Events:
				raised = append(raised, e)
				continue
			default:
			}
			break
		}
		t.Logf("%s: data %.2f%%, metadata %.2f%%, capacity %d MiB, events %q", step, tp.GetDataPercent(), tp.GetMetadataPercent(), free.FreeBytes/mib, raised)
		return free.FreeBytes, tp.GetDataPercent(), raised
	}
	create := func(name string, size int64) (string, error) {
		r, err := c.CreateLV(ctx, &proto.CreateLVRequest{Name: name, DeviceClass: "thin", SizeBytes: size})
		return r.GetVolume().GetPath(), err
	}
	write := func(path string, off int64, b []byte) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt(b, off); err != nil {
			t.Fatalf("write %s at %d: %v", path, off, err)
		}
		if err := f.Sync(); err != nil {
			t.Fatalf("sync %s: %v", path, err)
		}
	}

	empty, _, raised := check("empty pool")
	// The ratio allows 10 × 256 MiB; the pool's real room below 60 % is about 153 MiB.
	if empty > 154*mib || empty < 150*mib || len(raised) > 0 {
		t.Fatalf("empty pool: capacity %d MiB, events %q; want about 60 %% of 256 MiB (not the ratio's 2560 MiB) and no event", empty/mib, raised)
	}
	a, err := create("vol-a", 128*mib)
	if err != nil {
		t.Fatal(err)
	}
	b, err := create("vol-b", 128*mib)
	if err != nil {
		t.Fatal(err)
	}
	dataA := data(1, 64*mib)
	write(a, 0, dataA)
	afterA, pct, raised := check("64 MiB written")
	if afterA > empty-60*mib || pct < 24 || len(raised) > 0 {
		t.Errorf("after 64 MiB of real writes: capacity %d MiB (was %d), data %.1f%%, events %q; want the capacity down by the data written, no event",
			afterA/mib, empty/mib, pct, raised)
	}
	write(b, 0, data(2, 72*mib))
	_, pct, raised = check("136 MiB written")
	if pct < 50 || len(raised) != 1 || !strings.HasPrefix(raised[0], "Warning ThinPoolNearlyFull node vm: thin pool tvg/pool") {
		t.Errorf("at %.1f%% data: events %q, want one ThinPoolNearlyFull", pct, raised)
	}
	if _, _, raised = check("136 MiB written, looked at again"); len(raised) > 0 {
		t.Errorf("the same usage again raised %q, want nothing", raised)
	}
	write(b, 72*mib, data(3, 24*mib))
	full, pct, raised := check("160 MiB written")
	if pct < 60 || full != 0 || len(raised) != 1 || !strings.HasPrefix(raised[0], "Warning ThinPoolFull node vm: thin pool tvg/pool") {
		t.Errorf("at %.1f%% data: capacity %d, events %q; want 0 and one ThinPoolFull", pct, full, raised)
	}
	_, err = create("vol-c", 4*mib)
	if msg := status.Convert(err).Message(); status.Code(err) != codes.ResourceExhausted ||
		!strings.Contains(msg, `thin pool tvg/pool of device class "thin" is past its data usage threshold`) || !strings.Contains(msg, "threshold 60%") {
		t.Errorf("new volume past the threshold: %v; want ResourceExhausted naming the pool, its use and the threshold", err)
	}
	if _, err := os.Stat("/dev/tvg/vol-c"); err == nil {
		t.Errorf("the refused volume exists")
	}
	// The volumes already there keep their data and take writes (the pool itself is not full).
	readBack(t, a, dataA)
	write(a, 64*mib, data(4, 4*mib))
	if _, _, raised = check("an existing volume written past the threshold"); len(raised) > 0 {
		t.Errorf("writing on past the threshold raised %q again", raised)
	}
	for _, name := range []string{"vol-a", "vol-b"} {
		if _, err := c.RemoveLV(ctx, &proto.RemoveLVRequest{Name: name, DeviceClass: "thin"}); err != nil {
			t.Errorf("remove %s: %v", name, err)
		}
	}
}
