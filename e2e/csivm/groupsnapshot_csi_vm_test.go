package csivm

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/csidriver"
	"github.com/lvms-dev/lvms/e2e/vm"
	"github.com/lvms-dev/lvms/nodeagent/groupsnapshot"
	"github.com/lvms-dev/lvms/nodeagent/groupsnapshot/reconciler"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/operator/csicontroller"
)

// TestVMGroupSnapshotCSI takes a group snapshot through the CSI GroupController and the node agent's group
// reconciler over the real engine, on a real kernel: both members are read-only thin snapshots of their
// origins tagged with the group, a member restores as a single snapshot does and holds the origin's data,
// a group with a thick volume is refused with nothing created, and deleting the group removes its
// snapshots and nothing else.
func TestVMGroupSnapshotCSI(t *testing.T) {
	if !vm.InGuest() {
		t.Parallel() // one VM of one vCPU each: two at once use both host cores
		vm.Run(t, vmOptions())
		return
	}
	cfg := setupNode(t)
	names := driver.New(false)
	d := csidriver.StartFake(t, csidriver.FakeOptions{Names: names, Node: "vm", Runner: lvm.Runner{}, Config: cfg})
	eng, err := groupsnapshot.New(groupsnapshot.Options{Runner: lvm.Runner{}, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	rec := reconciler.New(d.Client, reconciler.Options{NodeName: "vm", Engine: eng,
		VolumeGroup: func(dc string) (string, bool, error) {
			c, _ := cfg.DeviceClass(dc)
			return c.VolumeGroup, c.Type == "thin", nil
		}})
	// The agent's controller manager, played by a loop as StartFake does for LogicalVolumes.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			list := &topolvmv1.LogicalVolumeGroupSnapshotList{}
			if err := d.Client.List(ctx, list); err == nil {
				for _, g := range list.Items {
					if _, err := rec.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: g.Name}}); err != nil && ctx.Err() == nil {
						t.Logf("reconcile group %s: %v", g.Name, err)
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(25 * time.Millisecond):
			}
		}
	}()
	groups := csicontroller.NewGroupController(d.Controller)
	call, stop := context.WithTimeout(context.Background(), 2*time.Minute)
	defer stop()

	create := func(name, dc string, src *csi.VolumeContentSource) string {
		t.Helper()
		resp, err := d.Controller.CreateVolume(call, &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: []*csi.VolumeCapability{blockCap()},
			CapacityRange: &csi.CapacityRange{RequiredBytes: 64 << 20}, Parameters: map[string]string{names.DeviceClassParam(): dc}, VolumeContentSource: src})
		if err != nil {
			t.Fatalf("CreateVolume %s: %v", name, err)
		}
		return resp.GetVolume().GetVolumeId()
	}
	db, wal, thick := create("db", "thin", nil), create("wal", "thin", nil), create("thick", "thick", nil)
	payload := data(7, 4096)
	if err := writeAt("/dev/thin/"+db, payload); err != nil {
		t.Fatal(err)
	}

	// Refused: a thick volume, checked by the node before anything is created or suspended.
	_, err = groups.CreateVolumeGroupSnapshot(call, &csi.CreateVolumeGroupSnapshotRequest{Name: "refused", SourceVolumeIds: []string{db, thick}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("group with a thick volume: %v, want FailedPrecondition", err)
	}
	_, err = groups.CreateVolumeGroupSnapshot(call, &csi.CreateVolumeGroupSnapshotRequest{Name: "refused-thick", SourceVolumeIds: []string{thick, create("thick2", "thick", nil)}})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "thick") {
		t.Fatalf("group of thick volumes: %v, want FailedPrecondition naming the thick class", err)
	}
	if out := sh(t, "lvs", "--noheadings", "-o", "lv_name", "thin"); strings.Count(out, "\n") != 3 { // pool, db, wal
		t.Fatalf("thin LVs after the refusals:\n%s", out)
	}

	resp, err := groups.CreateVolumeGroupSnapshot(call, &csi.CreateVolumeGroupSnapshotRequest{Name: "app", SourceVolumeIds: []string{db, wal}})
	if err != nil {
		t.Fatalf("CreateVolumeGroupSnapshot: %v", err)
	}
	members := map[string]string{}
	for _, s := range resp.GetGroupSnapshot().GetSnapshots() {
		members[s.GetSourceVolumeId()] = s.GetSnapshotId()
		attrs := strings.TrimSpace(sh(t, "lvs", "--noheadings", "-o", "lv_attr,origin,lv_tags", "thin/"+s.GetSnapshotId()))
		if !strings.HasPrefix(attrs, "Vr") || !strings.Contains(attrs, s.GetSourceVolumeId()) || !strings.Contains(attrs, "lvms-group=") {
			t.Errorf("member %s of %s: lvs %q, want a read-only thin snapshot of its origin tagged with the group", s.GetSnapshotId(), s.GetSourceVolumeId(), attrs)
		}
	}
	if len(members) != 2 {
		t.Fatalf("members %v", members)
	}
	restored := create("restored", "thin", &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
		Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: members[db]}}})
	got, err := readAt("/dev/thin/"+restored, len(payload))
	if err != nil || string(got) != string(payload) {
		t.Errorf("restored member reads %d bytes (err %v), not the origin's data", len(got), err)
	}

	if _, err := groups.DeleteVolumeGroupSnapshot(call, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "app",
		SnapshotIds: []string{members[db], members[wal]}}); err != nil {
		t.Fatalf("DeleteVolumeGroupSnapshot: %v", err)
	}
	out := sh(t, "lvs", "--noheadings", "-o", "lv_name", "thin")
	for _, id := range []string{members[db], members[wal]} {
		if strings.Contains(out, id) {
			t.Errorf("member %s survived the group's deletion:\n%s", id, out)
		}
	}
	for _, id := range []string{db, wal, restored} {
		if !strings.Contains(out, id) {
			t.Errorf("volume %s was removed with the group:\n%s", id, out)
		}
	}
}

// writeAt writes b at the start of a block device, synchronously.
func writeAt(dev string, b []byte) error {
	f, err := os.OpenFile(dev, os.O_WRONLY|os.O_SYNC, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readAt reads n bytes at the start of a block device.
func readAt(dev string, n int) ([]byte, error) {
	f, err := os.Open(dev)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	_, err = f.ReadAt(b, 0)
	return b, err
}
