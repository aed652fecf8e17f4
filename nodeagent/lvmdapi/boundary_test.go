package lvmdapi

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi/proto"
)

// ran lists the lvm subcommands (lvcreate, lvresize, ...) the recorder saw.
func ran(rec *lvm.Recorder, sub string) []string {
	var out []string
	for _, c := range rec.Session().Commands {
		if slices.Contains(c.Argv, sub) {
			out = append(out, strings.Join(c.Argv, " "))
		}
	}
	return out
}

// TestServer_Boundaries: requests at the edges of what lvmd accepts — zero and unaligned sizes, growth by
// exactly the free space, a resize or clone to the current size — answer as documented and run no more
// lvm2 than needed.
func TestServer_Boundaries(t *testing.T) {
	ctx := context.Background()
	invalid := func(what string, err error) {
		t.Helper()
		if code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", what, err)
		}
	}
	c, sim, rec := newRecordedServer(t)
	_, err := c.CreateLV(ctx, &proto.CreateLVRequest{Name: "zero", SizeBytes: 0})
	invalid("CreateLV of 0 bytes", err)
	if _, err := c.CreateLV(ctx, &proto.CreateLVRequest{Name: "v", SizeBytes: gib}); err != nil {
		t.Fatal(err)
	}
	_, err = c.ResizeLV(ctx, &proto.ResizeLVRequest{Name: "v", SizeBytes: 0})
	invalid("ResizeLV to 0 bytes", err)
	_, err = c.ResizeLV(ctx, &proto.ResizeLVRequest{Name: "v", SizeBytes: 2*gib + 1})
	invalid("ResizeLV to an unaligned size", err)

	// A resize to the current size changes nothing and runs no lvresize.
	if r, err := c.ResizeLV(ctx, &proto.ResizeLVRequest{Name: "v", SizeBytes: gib}); err != nil || r.SizeBytes != gib {
		t.Errorf("resize to the current size: %v, %v", r, err)
	}
	if got := ran(rec, "lvresize"); len(got) != 0 {
		t.Errorf("a resize to the current size ran %v", got)
	}
	// vg1 has 20 GiB: growing the 1 GiB volume by the 19 GiB left fits exactly; one more extent does not,
	// and the refusal says by how much it would grow.
	_, err = c.ResizeLV(ctx, &proto.ResizeLVRequest{Name: "v", SizeBytes: 21 * gib})
	if code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), fmt.Sprintf("to grow v by %d bytes", 20*gib)) {
		t.Errorf("grow beyond the VG: %v, want ResourceExhausted naming the %d bytes asked for", err, 20*gib)
	}
	if r, err := c.ResizeLV(ctx, &proto.ResizeLVRequest{Name: "v", SizeBytes: 20 * gib}); err != nil || r.SizeBytes != 20*gib {
		t.Errorf("grow by exactly the free space: %v, %v", r, err)
	}

	// Snapshots: both names are required, sizes must be aligned.
	if _, err := c.CreateLV(ctx, &proto.CreateLVRequest{Name: "src", DeviceClass: "thin", SizeBytes: 2 * gib}); err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateLVSnapshot(ctx, &proto.CreateLVSnapshotRequest{Name: "s", DeviceClass: "thin", AccessType: "ro"})
	invalid("snapshot without a source", err)
	_, err = c.CreateLVSnapshot(ctx, &proto.CreateLVSnapshotRequest{SourceVolume: "src", DeviceClass: "thin", AccessType: "ro"})
	invalid("snapshot without a name", err)
	_, err = c.CreateLVSnapshot(ctx, &proto.CreateLVSnapshotRequest{Name: "s", SourceVolume: "src", DeviceClass: "thin", AccessType: "ro", SizeBytes: 2*gib + 1})
	invalid("snapshot of an unaligned size", err)

	// A clone of the source's size needs no lvresize; it is active and writable.
	before := len(ran(rec, "lvresize"))
	cl, err := c.CreateLVSnapshot(ctx, &proto.CreateLVSnapshotRequest{Name: "same", SourceVolume: "src", DeviceClass: "thin", AccessType: "rw", SizeBytes: 2 * gib})
	if err != nil || cl.GetSnapshot().GetSizeBytes() != 2*gib {
		t.Fatalf("clone of the source's size: %v, %v", cl, err)
	}
	if got := ran(rec, "lvresize"); len(got) != before {
		t.Errorf("a clone of the source's size ran %v", got[before:])
	}
	// A snapshot whose activation fails is removed again, and the error says only what failed.
	sim.FailNext("lvchange", "  device-mapper: reload ioctl failed: Invalid argument")
	_, err = c.CreateLVSnapshot(ctx, &proto.CreateLVSnapshotRequest{Name: "broken", SourceVolume: "src", DeviceClass: "raw2", AccessType: "rw"})
	if code(err) != codes.Unimplemented {
		t.Errorf("snapshot through a thick class: %v, want Unimplemented", err)
	}
	_, err = c.CreateLVSnapshot(ctx, &proto.CreateLVSnapshotRequest{Name: "broken", SourceVolume: "src", DeviceClass: "thin", AccessType: "rw"})
	if msg := status.Convert(err).Message(); code(err) != codes.Internal || !strings.Contains(msg, "reload ioctl failed") || strings.Contains(msg, "removing it failed") {
		t.Errorf("failed activation: %v, want Internal with lvm2's error and no removal failure", err)
	}

	// The thin class's ratio allows 5 × 4 GiB = 20 GiB of volumes, 4 GiB are taken; the pool's real room
	// is less: floor(90 % × 4 GiB) = 3865470566 bytes with no data written. A clone of the whole extents
	// below it (921 of 4 MiB) fits, is grown to its size and activated writable; one byte more than the
	// room does not.
	sim.SetPoolUsage("vg2", "pool0", "0.00", "1.50")
	const room = 921 * (4 << 20)
	if _, err := c.CreateLVSnapshot(ctx, &proto.CreateLVSnapshotRequest{Name: "big", SourceVolume: "src", DeviceClass: "thin", AccessType: "rw", SizeBytes: 3865473024}); code(err) != codes.ResourceExhausted {
		t.Errorf("clone beyond the pool's real room: %v, want ResourceExhausted", err)
	}
	big, err := c.CreateLVSnapshot(ctx, &proto.CreateLVSnapshotRequest{Name: "big", SourceVolume: "src", DeviceClass: "thin", AccessType: "rw", SizeBytes: room})
	if err != nil || big.GetSnapshot().GetSizeBytes() != room {
		t.Fatalf("clone of exactly the space left: %v, %v", big, err)
	}
	if lv, ok := sim.LV("vg2", "big"); !ok || !lv.Active || lv.ReadOnly || lv.Size != room {
		t.Errorf("clone grown to %d bytes: %+v, want an active writable volume", room, lv)
	}
	// lvm2 creates a thin snapshot with activation skipped: growing it is not enough, it must be activated.
	if !slices.ContainsFunc(ran(rec, "lvchange"), func(c string) bool { return strings.HasSuffix(c, " vg2/big") && strings.Contains(c, "-a y") }) {
		t.Errorf("the grown clone was not activated: %v", ran(rec, "lvchange"))
	}

}
