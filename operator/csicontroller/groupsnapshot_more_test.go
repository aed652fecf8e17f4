package csicontroller_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/operator/csicontroller"
)

// TestGroupSnapshot_Members: a member is a snapshot of its source as it is now (a grown source's current
// size), named within the API's 253 characters however long the group's name; a clone (a volume with a
// source, writable) is a volume like any other and may be grouped.
func TestGroupSnapshot_Members(t *testing.T) {
	grown := volume("grown", "node-a", "thin")
	grown.Status.CurrentSize = resource.NewQuantity(3*gib, resource.BinarySI)
	clone := volume("clone", "node-a", "thin")
	clone.Spec.Source, clone.Spec.AccessType = "grown", "rw"
	k := newCluster(t, nil, grown, clone)
	ctx := callCtx(t)
	name := strings.Repeat("g", 253)
	resp, err := k.groups.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: name, SourceVolumeIds: []string{"id-grown", "id-clone"}})
	if err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int64{}
	for _, s := range resp.GetGroupSnapshot().GetSnapshots() {
		sizes[s.GetSourceVolumeId()] = s.GetSizeBytes()
	}
	if sizes["id-grown"] != 3*gib || sizes["id-clone"] != gib {
		t.Errorf("member sizes %v; want the grown source's 3 GiB", sizes)
	}
	lvs := &topolvmv1.LogicalVolumeList{}
	if err := k.c.List(ctx, lvs, client.HasLabels{topolvmv1.GroupSnapshotMemberLabel}); err != nil {
		t.Fatal(err)
	}
	for _, lv := range lvs.Items {
		if len(lv.Name) > 253 {
			t.Errorf("member %s… is %d characters long", lv.Name[:20], len(lv.Name))
		}
		if lv.Spec.Source == "grown" && lv.Spec.Size.Value() != 3*gib {
			t.Errorf("member of the grown source asks for %s", lv.Spec.Size.String())
		}
	}
	if len(lvs.Items) != 2 {
		t.Errorf("%d members", len(lvs.Items))
	}
}

// TestGroupSnapshot_ExistingGroupOnAnotherNode: a group object of the name that is on another node is not this
// group, even with the same members.
func TestGroupSnapshot_ExistingGroupOnAnotherNode(t *testing.T) {
	k := newCluster(t, nil, volume("db", "node-a", "thin"), volume("wal", "node-a", "thin"))
	ctx := callCtx(t)
	req := &csi.CreateVolumeGroupSnapshotRequest{Name: "group", SourceVolumeIds: []string{"id-db", "id-wal"}}
	if _, err := k.groups.CreateVolumeGroupSnapshot(ctx, req); err != nil {
		t.Fatal(err)
	}
	g := &topolvmv1.LogicalVolumeGroupSnapshot{}
	if err := k.c.Get(ctx, types.NamespacedName{Name: "group"}, g); err != nil {
		t.Fatal(err)
	}
	for _, change := range []func(*topolvmv1.LogicalVolumeGroupSnapshot){
		func(g *topolvmv1.LogicalVolumeGroupSnapshot) { g.Name, g.Spec.NodeName = "group-b", "node-b" },
		func(g *topolvmv1.LogicalVolumeGroupSnapshot) { g.Name, g.Spec.DeviceClass = "group-c", "other" },
	} {
		other := &topolvmv1.LogicalVolumeGroupSnapshot{Spec: *g.Spec.DeepCopy()}
		change(other)
		for i := range other.Spec.Members {
			other.Spec.Members[i].Snapshot = strings.Replace(other.Spec.Members[i].Snapshot, "group", other.Name, 1)
		}
		if err := k.c.Create(ctx, other); err != nil {
			t.Fatal(err)
		}
		_, err := k.groups.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: other.Name, SourceVolumeIds: []string{"id-db", "id-wal"}})
		if status.Code(err) != codes.AlreadyExists {
			t.Errorf("group %s on %s/%s: %v; want AlreadyExists", other.Name, other.Spec.NodeName, other.Spec.DeviceClass, err)
		}
	}
}

// TestGroupSnapshot_DeleteAndGet: deleting or getting with a snapshot ID that is labelled as the group's but is
// not one of its members is refused; deleting leaves a labelled volume that is not a snapshot (a restore that
// kept the label) alone; a ready group whose member has no volume is an error, not an empty snapshot ID; a
// deletion that fails says so.
func TestGroupSnapshot_DeleteAndGet(t *testing.T) {
	k := newCluster(t, nil, volume("db", "node-a", "thin"), volume("wal", "node-a", "thin"))
	ctx := callCtx(t)
	resp, err := k.groups.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "group", SourceVolumeIds: []string{"id-db", "id-wal"}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range resp.GetGroupSnapshot().GetSnapshots() {
		ids = append(ids, s.GetSnapshotId())
	}
	stray := volume("stray", "node-a", "thin")
	stray.Labels = map[string]string{topolvmv1.GroupSnapshotMemberLabel: "group"}
	stray.Spec.Source, stray.Spec.AccessType = "db", "ro"
	restored := volume("restored", "node-a", "thin")
	restored.Labels = map[string]string{topolvmv1.GroupSnapshotMemberLabel: "group"}
	restored.Spec.Source, restored.Spec.AccessType = "db", "rw"
	for _, o := range []*topolvmv1.LogicalVolume{stray, restored} {
		st := o.Status
		if err := k.c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		o.Status = st
		if err := k.c.Status().Update(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	_, err = k.groups.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: "group", SnapshotIds: []string{ids[0], "id-stray"}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "id-stray") {
		t.Errorf("get naming a labelled volume that is not a member: %v", err)
	}
	_, err = k.groups.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "group", SnapshotIds: []string{"id-stray"}})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("delete naming a labelled volume that is not a member: %v", err)
	}

	// A member without its volume in a ready group.
	member := &topolvmv1.LogicalVolume{}
	g := &topolvmv1.LogicalVolumeGroupSnapshot{}
	if err := k.c.Get(ctx, types.NamespacedName{Name: "group"}, g); err != nil {
		t.Fatal(err)
	}
	if err := k.c.Get(ctx, types.NamespacedName{Name: g.Spec.Members[0].Snapshot}, member); err != nil {
		t.Fatal(err)
	}
	volumeID := member.Status.VolumeID
	member.Status.VolumeID = ""
	if err := k.c.Status().Update(ctx, member); err != nil {
		t.Fatal(err)
	}
	_, err = k.groups.GetVolumeGroupSnapshot(ctx, &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: "group"})
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "has no volume") {
		t.Errorf("a member without its volume: %v", err)
	}
	member.Status.VolumeID = volumeID
	if err := k.c.Status().Update(ctx, member); err != nil {
		t.Fatal(err)
	}

	del, err := k.groups.DeleteVolumeGroupSnapshot(ctx, &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "group", SnapshotIds: ids})
	if err != nil || del == nil {
		t.Fatalf("delete: %v, %v", del, err)
	}
	lvs, groups := k.objects(t)
	if strings.Join(lvs, ",") != "db,restored,wal" || len(groups) != 0 {
		t.Errorf("after delete: volumes %v, groups %v; want the sources and the labelled restore only", lvs, groups)
	}
}

// TestGroupSnapshot_DeleteFails: a deletion that cannot list the members is an error, not a success.
func TestGroupSnapshot_DeleteFails(t *testing.T) {
	k := newCluster(t, nil)
	boom := errors.New("etcd is down")
	broken := interceptor.NewClient(k.c.(client.WithWatch), interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
		return boom
	}})
	g := csicontroller.NewGroupController(csicontroller.NewController(broken, nil, csicontroller.Options{Names: names}))
	if resp, err := g.DeleteVolumeGroupSnapshot(callCtx(t), &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: "group"}); status.Code(err) != codes.Internal || resp != nil {
		t.Errorf("listing failing: %v, %v; want Internal", resp, err)
	}
}

// TestGroupSnapshot_TakenFor: the group records the VolumeGroupSnapshot it was taken for (the console shows
// it) when the request's parameters name one validly; otherwise nothing.
func TestGroupSnapshot_TakenFor(t *testing.T) {
	for _, tc := range []struct {
		name, ns string
		want     bool
	}{
		{"nightly-1", "shop", true},
		{"", "shop", false},
		{"nightly-1", "", false},
		{"Nightly_1", "shop", false},
		{"nightly-1", "shop.example", false},
	} {
		k := newCluster(t, nil, volume("db", "node-a", "thin"))
		ctx := callCtx(t)
		params := map[string]string{topolvmv1.ParameterVolumeGroupSnapshotName: tc.name, topolvmv1.ParameterVolumeGroupSnapshotNamespace: tc.ns, "other": "x"}
		if _, err := k.groups.CreateVolumeGroupSnapshot(ctx, &csi.CreateVolumeGroupSnapshotRequest{Name: "group", SourceVolumeIds: []string{"id-db"}, Parameters: params}); err != nil {
			t.Fatal(err)
		}
		g := &topolvmv1.LogicalVolumeGroupSnapshot{}
		if err := k.c.Get(ctx, types.NamespacedName{Name: "group"}, g); err != nil {
			t.Fatal(err)
		}
		a := g.Annotations
		got := a[topolvmv1.AnnotationVolumeGroupSnapshotName] == tc.name && a[topolvmv1.AnnotationVolumeGroupSnapshotNamespace] == tc.ns && len(a) == 2
		if got != tc.want || (!tc.want && len(a) != 0) {
			t.Errorf("%q in %q: annotations %v; want recorded: %v", tc.name, tc.ns, a, tc.want)
		}
	}
}
