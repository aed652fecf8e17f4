package csivm

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lvms-dev/lvms/e2e/vm"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvm/lvmtest"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi/proto"
	"github.com/lvms-dev/lvms/nodeagent/lvmsim"
)

const sessionFile = "testdata/lvmd-session.json"

// lvmdScript drives the lvmd service through every call with fixed names and checks what a client sees.
// It runs against real lvm2 in the VM (recording) and against the recording on the host (replaying).
func lvmdScript(t *testing.T, c lvmdapi.Client) {
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	thick, err := c.CreateLV(ctx, &proto.CreateLVRequest{Name: "vol-thick", DeviceClass: "thick", SizeBytes: 512 * mib, Tags: []string{"pvc"}})
	must(err)
	if v := thick.Volume; v.SizeBytes != 512*mib || v.Path != "/dev/thick/vol-thick" || v.Attr[0] != '-' ||
		!slices.Contains(v.Tags, "pvc") || !slices.Contains(v.Tags, lvm.VolumeTag) {
		t.Errorf("thick volume %v", v)
	}
	if vm.InGuest() && thick.Volume.DevMajor == 0 {
		t.Errorf("thick volume %v: no device numbers for an active LV", thick.Volume)
	}
	thin, err := c.CreateLV(ctx, &proto.CreateLVRequest{Name: "vol-thin", DeviceClass: "thin", SizeBytes: 1024 * mib})
	must(err)
	if v := thin.Volume; v.SizeBytes != 1024*mib || v.Attr[0] != 'V' {
		t.Errorf("thin volume %v", v)
	}
	r, err := c.ResizeLV(ctx, &proto.ResizeLVRequest{Name: "vol-thick", DeviceClass: "thick", SizeBytes: 768 * mib})
	must(err)
	if r.SizeBytes != 768*mib {
		t.Errorf("resized to %d", r.SizeBytes)
	}
	snap, err := c.CreateLVSnapshot(ctx, &proto.CreateLVSnapshotRequest{Name: "snap-ro", DeviceClass: "thin", SourceVolume: "vol-thin", AccessType: "ro"})
	must(err)
	if v := snap.Snapshot; v.Attr[0] != 'V' || v.Attr[1] != 'r' || v.Attr[4] != 'a' {
		t.Errorf("snapshot %v: want an active read-only thin volume", v)
	}
	// Grown past its source, within the pool's real room (90 % of 1.5 GiB).
	clone, err := c.CreateLVSnapshot(ctx, &proto.CreateLVSnapshotRequest{Name: "clone-rw", DeviceClass: "thin", SourceVolume: "snap-ro", AccessType: "rw", SizeBytes: 1280 * mib})
	must(err)
	if v := clone.Snapshot; v.Attr[1] != 'w' || v.Attr[4] != 'a' || v.SizeBytes != 1280*mib {
		t.Errorf("clone %v: want an active writable 1.25 GiB thin volume", v)
	}
	list, err := c.GetLVList(ctx, &proto.GetLVListRequest{DeviceClass: "thin"})
	must(err)
	var got []string
	for _, v := range list.Volumes {
		got = append(got, v.Name)
	}
	if strings.Join(got, ",") != "clone-rw,snap-ro,vol-thin" {
		t.Errorf("thin volumes %v", got)
	}
	// One message, then the stream ends: a Watch left open would read lvm2 again after every change, in
	// an order the replay cannot foresee.
	wctx, stopWatch := context.WithCancel(ctx)
	stream, err := c.Watch(wctx, &proto.Empty{})
	must(err)
	msg, err := stream.Recv()
	must(err)
	stopWatch()
	for {
		if _, err := stream.Recv(); err != nil {
			break // the server saw the cancel
		}
	}
	// thin: the ratio leaves 5 × 1.5 GiB − (1 + 1 + 1.25) GiB virtual, the pool's real data less: 90 % of
	// 1.5 GiB less what is used; thick: 2 GiB disk − 768 MiB − lvm2 metadata.
	tp := msg.Items[1].GetThinPool()
	room := uint64(math.Floor(0.9*1536*mib) - math.Ceil(tp.GetDataPercent()/100*1536*mib))
	if tp.GetOverprovisionBytes() != room || room >= 5*1536*mib-3328*mib || tp.GetSizeBytes() != 1536*mib {
		t.Errorf("thin pool item %v: want the pool's real room %d", tp, room)
	}
	if free := msg.Items[0].GetFreeBytes(); free == 0 || free > 2048*mib-768*mib {
		t.Errorf("thick free %d", free)
	}
	if _, err := c.CreateLV(ctx, &proto.CreateLVRequest{Name: "too-big", DeviceClass: "thick", SizeBytes: 4096 * mib}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("too big: %v", err)
	}
	for _, name := range []string{"clone-rw", "snap-ro", "vol-thin"} {
		_, err := c.RemoveLV(ctx, &proto.RemoveLVRequest{Name: name, DeviceClass: "thin"})
		must(err)
	}
	_, err = c.RemoveLV(ctx, &proto.RemoveLVRequest{Name: "vol-thick", DeviceClass: "thick"})
	must(err)
	if _, err := c.RemoveLV(ctx, &proto.RemoveLVRequest{Name: "vol-thick", DeviceClass: "thick"}); status.Code(err) != codes.NotFound {
		t.Errorf("second remove: %v, want NotFound", err)
	}
}

func serve(t *testing.T, runner lvm.Runner, cfg *lvmd.Config) lvmdapi.Client {
	c, stop, err := lvmdapi.InProcess(lvmdapi.NewServer(runner, lvmdapi.StaticConfig(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return c
}

// TestVMRecordLVMD runs lvmdScript on real lvm2 and records lvm2's output. The recording reaches the host
// through a disk file; with LVMS_RECORD=1 the host stores it as testdata for TestLVMDReplay.
func TestVMRecordLVMD(t *testing.T) {
	if vm.InGuest() {
		cfg := setupNode(t)
		disks, err := vm.Disks()
		if err != nil {
			t.Fatal(err)
		}
		rec := lvm.NewRecorder(lvm.OSExecutor{}, "TestVMRecordLVMD in the e2e/vm lane (Debian kernel, Debian lvm2)")
		lvmdScript(t, serve(t, lvm.Runner{Exec: rec}, cfg))
		data, err := json.MarshalIndent(rec.Session(), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(disks[2], append(data, 0), 0o644); err != nil {
			t.Fatalf("write the recording to %s: %v", disks[2], err)
		}
		return
	}
	out := filepath.Join(t.TempDir(), "recording.img")
	o := vmOptions()
	o.Disks = append(o.Disks, vm.Disk{Path: out, Size: 8 << 20})
	vm.Run(t, o)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	data, _, _ = bytes.Cut(data, []byte{0})
	var s lvm.Session
	if err := json.Unmarshal(data, &s); err != nil || len(s.Commands) == 0 {
		t.Fatalf("no recording came back from the VM: %v", err)
	}
	if os.Getenv("LVMS_RECORD") == "1" {
		if err := s.Save(sessionFile); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %d lvm2 commands into %s", len(s.Commands), sessionFile)
	}
}

// TestLVMDReplay runs lvmdScript on the host against lvm2 output recorded in the VM lane (see
// TestVMRecordLVMD): the lvmd service parses and acts on real lvm2 JSON and errors.
func TestLVMDReplay(t *testing.T) {
	if vm.InGuest() {
		t.Skip("host test")
	}
	rp := lvmtest.Replay(t, sessionFile, "record it with LVMS_RECORD=1 go test -run TestVMRecordLVMD ./e2e/csivm")
	lvmdScript(t, serve(t, lvm.Runner{Exec: rp}, scriptConfig()))
}

// TestLVMDSimulated runs lvmdScript against lvmsim with the VM's layout: the stand-in the host tests use
// answers the script as real lvm2 did.
func TestLVMDSimulated(t *testing.T) {
	if vm.InGuest() {
		t.Skip("host test")
	}
	sim := lvmsim.New()
	sim.AddVG("thick", 2048*mib)
	sim.AddVG("thin", 2048*mib)
	sim.AddThinPool("thin", "pool", 1536*mib)
	lvmdScript(t, serve(t, sim.Runner(), scriptConfig()))
}

func scriptConfig() *lvmd.Config {
	zero := uint64(0)
	return &lvmd.Config{DeviceClasses: []lvmd.DeviceClass{
		{Name: "thick", VolumeGroup: "thick", Default: true, SpareGB: &zero},
		{Name: "thin", VolumeGroup: "thin", Type: lvmd.TypeThin, ThinPool: &lvmd.ThinPoolConfig{Name: "pool", OverprovisionRatio: 5}},
	}}
}
