package lvmdapi

import (
	"context"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi/proto"
	"github.com/lvms-dev/lvms/nodeagent/lvmsim"
)

const gib = 1 << 30

func ptr[T any](v T) *T { return &v }

// newTestServer has a thick class "ssd" (default, 2 GiB spare) on vg1 (20 GiB) and a thin class "thin"
// (ratio 5) on a 4 GiB pool in vg2 (10 GiB).
func newTestServer(t *testing.T) (Client, *lvmsim.LVM) {
	t.Helper()
	sim := lvmsim.New()
	sim.AddVG("vg1", 20*gib)
	sim.AddVG("vg2", 10*gib)
	sim.AddThinPool("vg2", "pool0", 4*gib)
	cfg := &lvmd.Config{
		DeviceClasses: []lvmd.DeviceClass{
			{Name: "ssd", VolumeGroup: "vg1", Default: true, SpareGB: ptr(uint64(2))},
			{Name: "thin", VolumeGroup: "vg2", Type: lvmd.TypeThin, ThinPool: &lvmd.ThinPoolConfig{Name: "pool0", OverprovisionRatio: 5}},
		},
		LVCreateOptionClasses: []lvmd.LVCreateOptionClass{{Name: "raid1", Options: []string{"--type=raid1"}}},
	}
	c, stop, err := InProcess(NewServer(sim.Runner(), StaticConfig(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return c, sim
}

func code(err error) codes.Code { return status.Code(err) }

func TestServer_CreateLV(t *testing.T) {
	tests := []struct {
		name     string
		req      *proto.CreateLVRequest
		wantCode codes.Code
		wantVG   string
		wantSize int64
	}{
		{name: "default class is thick", req: &proto.CreateLVRequest{Name: "a", SizeBytes: gib}, wantVG: "vg1", wantSize: gib},
		{name: "thin class", req: &proto.CreateLVRequest{Name: "b", DeviceClass: "thin", SizeBytes: 3 * gib}, wantVG: "vg2", wantSize: 3 * gib},
		// An empty 4 GiB pool with the 90 % data threshold has 3.6 GiB of real room: a bigger volume could fill
		// it on its own, whatever the ratio allows.
		{name: "thin up to the pool's real room", req: &proto.CreateLVRequest{Name: "c", DeviceClass: "thin", SizeBytes: 3584 << 20}, wantVG: "vg2", wantSize: 3584 << 20},
		{name: "thin beyond the pool's real room", req: &proto.CreateLVRequest{Name: "c", DeviceClass: "thin", SizeBytes: 19 * gib}, wantCode: codes.ResourceExhausted},
		{name: "thin beyond ratio × pool", req: &proto.CreateLVRequest{Name: "d", DeviceClass: "thin", SizeBytes: 21 * gib}, wantCode: codes.ResourceExhausted},
		// Spare is not subtracted for allocation: 20 GiB fit although 2 GiB are spare.
		{name: "thick uses the whole VG", req: &proto.CreateLVRequest{Name: "e", SizeBytes: 20 * gib}, wantVG: "vg1", wantSize: 20 * gib},
		{name: "thick beyond the VG", req: &proto.CreateLVRequest{Name: "f", SizeBytes: 21 * gib}, wantCode: codes.ResourceExhausted},
		{name: "unknown device class", req: &proto.CreateLVRequest{Name: "g", DeviceClass: "nvme", SizeBytes: gib}, wantCode: codes.NotFound},
		{name: "unknown option class", req: &proto.CreateLVRequest{Name: "h", LvcreateOptionClass: "raid5", SizeBytes: gib}, wantCode: codes.Internal},
		{name: "size not a multiple of 4096", req: &proto.CreateLVRequest{Name: "i", SizeBytes: 4097}, wantCode: codes.InvalidArgument},
		{name: "negative size", req: &proto.CreateLVRequest{Name: "j", SizeBytes: -4096}, wantCode: codes.InvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, sim := newTestServer(t)
			resp, err := c.CreateLV(context.Background(), tc.req)
			if code(err) != tc.wantCode {
				t.Fatalf("CreateLV: code %v (%v), want %v", code(err), err, tc.wantCode)
			}
			if tc.wantCode != codes.OK {
				return
			}
			lv, ok := sim.LV(tc.wantVG, tc.req.Name)
			if !ok {
				t.Fatalf("LV %s/%s was not created; VG has %+v", tc.wantVG, tc.req.Name, sim.LVs(tc.wantVG))
			}
			if resp.Volume.SizeBytes != tc.wantSize || int64(lv.Size) != tc.wantSize {
				t.Errorf("size: response %d, LV %d, want %d", resp.Volume.SizeBytes, lv.Size, tc.wantSize)
			}
			if want := "/dev/" + tc.wantVG + "/" + tc.req.Name; resp.Volume.Path != want {
				t.Errorf("path %q, want %q", resp.Volume.Path, want)
			}
		})
	}
}

func TestServer_ResizeRemoveList(t *testing.T) {
	ctx := context.Background()
	c, sim := newTestServer(t)
	if _, err := c.CreateLV(ctx, &proto.CreateLVRequest{Name: "v", DeviceClass: "ssd", SizeBytes: gib}); err != nil {
		t.Fatal(err)
	}
	r, err := c.ResizeLV(ctx, &proto.ResizeLVRequest{Name: "v", SizeBytes: 2 * gib})
	if err != nil || r.SizeBytes != 2*gib {
		t.Fatalf("grow: %v, %v; want 2 GiB", r, err)
	}
	r, err = c.ResizeLV(ctx, &proto.ResizeLVRequest{Name: "v", SizeBytes: gib})
	if err != nil || r.SizeBytes != 2*gib {
		t.Fatalf("shrink request: %v, %v; want the current 2 GiB back", r, err)
	}
	if _, err := c.ResizeLV(ctx, &proto.ResizeLVRequest{Name: "v", SizeBytes: 30 * gib}); code(err) != codes.ResourceExhausted {
		t.Fatalf("grow beyond VG: %v, want ResourceExhausted", err)
	}
	if _, err := c.ResizeLV(ctx, &proto.ResizeLVRequest{Name: "nope", SizeBytes: gib}); code(err) != codes.NotFound {
		t.Fatalf("resize missing LV: %v, want NotFound", err)
	}
	list, err := c.GetLVList(ctx, &proto.GetLVListRequest{DeviceClass: "ssd"})
	if err != nil || len(list.Volumes) != 1 || list.Volumes[0].Name != "v" {
		t.Fatalf("GetLVList: %v, %v; want [v]", list, err)
	}
	if _, err := c.RemoveLV(ctx, &proto.RemoveLVRequest{Name: "v"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := sim.LV("vg1", "v"); ok {
		t.Fatal("LV still exists after RemoveLV")
	}
	if _, err := c.RemoveLV(ctx, &proto.RemoveLVRequest{Name: "v"}); code(err) != codes.NotFound {
		t.Fatalf("second RemoveLV: %v, want NotFound", err)
	}
}

func TestServer_Snapshots(t *testing.T) {
	ctx := context.Background()
	c, sim := newTestServer(t)
	if _, err := c.CreateLV(ctx, &proto.CreateLVRequest{Name: "src", DeviceClass: "thin", SizeBytes: 2 * gib}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateLV(ctx, &proto.CreateLVRequest{Name: "thick", SizeBytes: gib}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		req      *proto.CreateLVSnapshotRequest
		wantCode codes.Code
		wantRO   bool
		wantSize uint64
	}{
		{name: "read-only snapshot", req: &proto.CreateLVSnapshotRequest{Name: "snap", DeviceClass: "thin", SourceVolume: "src", AccessType: "ro"}, wantRO: true, wantSize: 2 * gib},
		{name: "bigger writable clone", req: &proto.CreateLVSnapshotRequest{Name: "clone", DeviceClass: "thin", SourceVolume: "src", AccessType: "rw", SizeBytes: 3 * gib}, wantSize: 3 * gib},
		{name: "smaller than source", req: &proto.CreateLVSnapshotRequest{Name: "small", DeviceClass: "thin", SourceVolume: "src", AccessType: "rw", SizeBytes: gib}, wantCode: codes.OutOfRange},
		{name: "thick class", req: &proto.CreateLVSnapshotRequest{Name: "x", SourceVolume: "thick", AccessType: "ro"}, wantCode: codes.Unimplemented},
		{name: "missing source", req: &proto.CreateLVSnapshotRequest{Name: "y", DeviceClass: "thin", SourceVolume: "gone", AccessType: "ro"}, wantCode: codes.NotFound},
		{name: "bad access type", req: &proto.CreateLVSnapshotRequest{Name: "z", DeviceClass: "thin", SourceVolume: "src", AccessType: "rx"}, wantCode: codes.InvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.CreateLVSnapshot(ctx, tc.req)
			if code(err) != tc.wantCode {
				t.Fatalf("code %v (%v), want %v", code(err), err, tc.wantCode)
			}
			if tc.wantCode != codes.OK {
				return
			}
			lv, ok := sim.LV("vg2", tc.req.Name)
			if !ok || lv.Origin != "src" || lv.ReadOnly != tc.wantRO || !lv.Active || lv.Size != tc.wantSize {
				t.Fatalf("snapshot LV = %+v (found %v), want origin src, read-only %v, active, %d bytes", lv, ok, tc.wantRO, tc.wantSize)
			}
		})
	}
}

func TestServer_FailedActivationRemovesSnapshot(t *testing.T) {
	ctx := context.Background()
	c, sim := newTestServer(t)
	if _, err := c.CreateLV(ctx, &proto.CreateLVRequest{Name: "src", DeviceClass: "thin", SizeBytes: gib}); err != nil {
		t.Fatal(err)
	}
	sim.FailNext("lvchange", "  device-mapper: reload ioctl failed: Invalid argument")
	if _, err := c.CreateLVSnapshot(ctx, &proto.CreateLVSnapshotRequest{Name: "s", DeviceClass: "thin", SourceVolume: "src", AccessType: "rw"}); code(err) != codes.Internal {
		t.Fatalf("code %v (%v), want Internal", code(err), err)
	}
	if _, ok := sim.LV("vg2", "s"); ok {
		t.Fatal("a snapshot whose activation failed was left behind")
	}
}

func TestServer_Capacity(t *testing.T) {
	ctx := context.Background()
	c, _ := newTestServer(t)
	for _, req := range []*proto.CreateLVRequest{
		{Name: "a", SizeBytes: 4 * gib},
		{Name: "b", DeviceClass: "thin", SizeBytes: 3 * gib},
	} {
		if _, err := c.CreateLV(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	free := func(dc string) uint64 {
		r, err := c.GetFreeBytes(ctx, &proto.GetFreeBytesRequest{DeviceClass: dc})
		if err != nil {
			t.Fatal(err)
		}
		return r.FreeBytes
	}
	// thick: 20 − 4 − 2 spare. thin: the ratio allows 5×4 − 3 GiB, the pool's real data (1 % in the
	// simulator) leaves floor(90 % × 4 GiB) − ceil(1 % × 4 GiB) below its threshold, and the default 10 GiB
	// spare (applied to GetFreeBytes for thin classes too, as in TopoLVM) leaves nothing.
	const thinRoom = 3865470566 - 42949673
	if got := free("ssd"); got != 14*gib {
		t.Errorf("GetFreeBytes(ssd) = %d, want %d", got, 14*gib)
	}
	if got := free("thin"); got != 0 {
		t.Errorf("GetFreeBytes(thin) = %d, want 0", got)
	}
	if _, err := c.GetFreeBytes(ctx, &proto.GetFreeBytesRequest{DeviceClass: "nvme"}); code(err) != codes.NotFound {
		t.Errorf("GetFreeBytes(nvme): %v, want NotFound", err)
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Watch(wctx, &proto.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if msg.FreeBytes != 14*gib || len(msg.Items) != 2 {
		t.Fatalf("first Watch message %v, want default free 14 GiB and two items", msg)
	}
	thick, thin := msg.Items[0], msg.Items[1]
	if thick.DeviceClass != "ssd" || thick.FreeBytes != 14*gib || thick.SizeBytes != 20*gib || thick.ThinPool != nil {
		t.Errorf("thick item %v", thick)
	}
	// VG2: 10 GiB − 4 GiB pool = 6 GiB raw free; the thin capacity is the pool's real room.
	if thin.DeviceClass != "thin" || thin.FreeBytes != 6*gib || thin.SizeBytes != 10*gib ||
		thin.ThinPool.GetOverprovisionBytes() != thinRoom || thin.ThinPool.GetSizeBytes() != 4*gib {
		t.Errorf("thin item %v", thin)
	}
	if _, err := c.CreateLV(ctx, &proto.CreateLVRequest{Name: "c", SizeBytes: gib}); err != nil {
		t.Fatal(err)
	}
	msg, err = stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if msg.FreeBytes != 13*gib {
		t.Errorf("Watch after CreateLV: default free %d, want %d", msg.FreeBytes, 13*gib)
	}
}

// recorded wraps a test server's runner in a recorder, to show which commands ran.
func newRecordedServer(t *testing.T) (Client, *lvmsim.LVM, *lvm.Recorder) {
	t.Helper()
	sim := lvmsim.New()
	sim.AddVG("vg1", 20*gib)
	sim.AddVG("vg2", 10*gib)
	sim.AddThinPool("vg2", "pool0", 4*gib)
	cfg := &lvmd.Config{DeviceClasses: []lvmd.DeviceClass{
		{Name: "ssd", VolumeGroup: "vg1", Default: true},
		{Name: "thin", VolumeGroup: "vg2", Type: lvmd.TypeThin, ThinPool: &lvmd.ThinPoolConfig{Name: "pool0", OverprovisionRatio: 5}},
		{Name: "raw2", VolumeGroup: "vg2"},
	}}
	runner := sim.Runner()
	rec := lvm.NewRecorder(runner.Exec, "test")
	runner.Exec = rec
	c, stop, err := InProcess(NewServer(runner, StaticConfig(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return c, sim, rec
}

func ranLVRemove(rec *lvm.Recorder) []string {
	var out []string
	for _, c := range rec.Session().Commands {
		if slices.Contains(c.Argv, "lvremove") {
			out = append(out, strings.Join(c.Argv, " "))
		}
	}
	return out
}

// TestServer_RemoveLVRefusals: lvmd removes only volumes of the class asked for that LVMS (tag) or
// TopoLVM (uid name) created; everything else is refused with a status naming the LV and why, and no
// lvremove runs.
func TestServer_RemoveLVRefusals(t *testing.T) {
	ctx := context.Background()
	const topolvmUID = "0d5f3e6c-8a8e-4b4e-9f7a-2f0f7c1c9a11"
	tests := []struct {
		name     string
		req      *proto.RemoveLVRequest
		wantCode codes.Code
		wantMsg  string
		gone     string // vg/lv removed on success
	}{
		{name: "thin pool by name in its thin class", req: &proto.RemoveLVRequest{Name: "pool0", DeviceClass: "thin"},
			wantCode: codes.FailedPrecondition, wantMsg: "refusing to remove logical volume vg2/pool0: it is a thin pool, not a volume"},
		{name: "thin pool by name in a thick class of the same VG", req: &proto.RemoveLVRequest{Name: "pool0", DeviceClass: "raw2"},
			wantCode: codes.FailedPrecondition, wantMsg: "it is a thin pool"},
		{name: "LV without LVMS's tag", req: &proto.RemoveLVRequest{Name: "home", DeviceClass: "ssd"},
			wantCode: codes.PermissionDenied, wantMsg: `refusing to remove logical volume vg1/home: it has no "lvms-volume" tag and its name is not a LogicalVolume uid`},
		{name: "thin volume through the thick class of its VG", req: &proto.RemoveLVRequest{Name: "tv", DeviceClass: "raw2"},
			wantCode: codes.FailedPrecondition, wantMsg: `logical volume vg2/tv is not a volume of device class "raw2"`},
		{name: "someone else's thin volume through the thick class of its VG", req: &proto.RemoveLVRequest{Name: "foreign", DeviceClass: "raw2"},
			wantCode: codes.FailedPrecondition, wantMsg: `logical volume vg2/foreign is not a volume of device class "raw2"`},
		{name: "untagged LV named by TopoLVM's rule", req: &proto.RemoveLVRequest{Name: topolvmUID, DeviceClass: "ssd"}, gone: "vg1/" + topolvmUID},
		{name: "LV created through lvmd", req: &proto.RemoveLVRequest{Name: "mine", DeviceClass: "ssd"}, gone: "vg1/mine"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, sim, rec := newRecordedServer(t)
			direct := sim.Runner() // LVs made behind lvmd's back carry no tag
			if err := direct.CreateLV(ctx, "vg1", "home", gib); err != nil {
				t.Fatal(err)
			}
			if err := direct.CreateThinLV(ctx, "vg2", "pool0", "foreign", gib); err != nil {
				t.Fatal(err)
			}
			if err := direct.CreateVolume(ctx, lvm.VolumeSpec{VG: "vg1", Name: topolvmUID, Size: gib}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.CreateLV(ctx, &proto.CreateLVRequest{Name: "mine", SizeBytes: gib}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.CreateLV(ctx, &proto.CreateLVRequest{Name: "tv", DeviceClass: "thin", SizeBytes: gib}); err != nil {
				t.Fatal(err)
			}
			before := len(sim.LVs("vg1")) + len(sim.LVs("vg2"))
			_, err := c.RemoveLV(ctx, tc.req)
			if code(err) != tc.wantCode || (tc.wantMsg != "" && !strings.Contains(status.Convert(err).Message(), tc.wantMsg)) {
				t.Fatalf("RemoveLV: %v, want %v with %q", err, tc.wantCode, tc.wantMsg)
			}
			if tc.wantCode != codes.OK {
				if ran := ranLVRemove(rec); len(ran) > 0 {
					t.Errorf("a refused removal ran %v", ran)
				}
				if after := len(sim.LVs("vg1")) + len(sim.LVs("vg2")); after != before {
					t.Errorf("%d LVs before, %d after a refused removal", before, after)
				}
				return
			}
			vg, name, _ := strings.Cut(tc.gone, "/")
			if _, ok := sim.LV(vg, name); ok {
				t.Errorf("%s still exists", tc.gone)
			}
		})
	}
}

// TestServer_TagsNewVolumes: every volume lvmd creates carries lvm.VolumeTag besides the client's tags.
func TestServer_TagsNewVolumes(t *testing.T) {
	ctx := context.Background()
	c, sim := newTestServer(t)
	if _, err := c.CreateLV(ctx, &proto.CreateLVRequest{Name: "a", SizeBytes: gib, Tags: []string{"pvc"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateLV(ctx, &proto.CreateLVRequest{Name: "b", DeviceClass: "thin", SizeBytes: gib}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateLVSnapshot(ctx, &proto.CreateLVSnapshotRequest{Name: "s", DeviceClass: "thin", SourceVolume: "b", AccessType: "ro"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ vg, name string }{{"vg1", "a"}, {"vg2", "b"}, {"vg2", "s"}} {
		if lv, _ := sim.LV(tc.vg, tc.name); !slices.Contains(lv.Tags, lvm.VolumeTag) {
			t.Errorf("%s/%s tags %v, want %q", tc.vg, tc.name, lv.Tags, lvm.VolumeTag)
		}
	}
	if lv, _ := sim.LV("vg1", "a"); !slices.Contains(lv.Tags, "pvc") {
		t.Errorf("client's tag lost: %v", lv.Tags)
	}
}
