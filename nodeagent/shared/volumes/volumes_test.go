package volumes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/shared/lockspace"
)

// vgLVs plays lvm2 on one shared volume group: lvs reports the LVs it holds, lvcreate and lvremove change
// them, and lvremove of an LV another node has active fails with lvm2's words (as e2e/sharedvm logs them
// from lvm2 2.03.16: "LV locked by other host: <vg>/<lv>" then "Failed to lock logical volume <vg>/<lv>.").
type vgLVs struct {
	lvs      map[string]uint64
	lockedBy map[string]bool // LVs active on another node
	ran      []string
}

func (v *vgLVs) Execute(_ context.Context, cmd lvm.Command) (lvm.Result, error) {
	sub := ""
	for _, a := range cmd.Argv {
		if slices.Contains([]string{"lvs", "lvcreate", "lvremove", "lvextend"}, a) {
			sub = a
			break
		}
	}
	v.ran = append(v.ran, sub)
	last := cmd.Argv[len(cmd.Argv)-1]
	switch sub {
	case "lvs":
		var rows []string
		for name, size := range v.lvs {
			rows = append(rows, fmt.Sprintf(`{"lv_name":%q,"lv_size":"%d","lv_active_locally":"0","lv_active_exclusively":"0"}`, name, size))
		}
		return lvm.Result{Stdout: []byte(`{"report":[{"lv":[` + strings.Join(rows, ",") + `]}]}`)}, nil
	case "lvcreate":
		name := cmd.Argv[slices.Index(cmd.Argv, "-n")+1]
		v.lvs[name] = 64 << 20
		return lvm.Result{}, nil
	case "lvremove":
		name := strings.TrimPrefix(last, "san/")
		if v.lockedBy[name] {
			msg := fmt.Sprintf("  LV locked by other host: %s\n  Failed to lock logical volume %s.\n", last, last)
			return lvm.Result{ExitCode: 5, Stderr: []byte(msg)}, nil
		}
		delete(v.lvs, name)
		return lvm.Result{}, nil
	}
	return lvm.Result{ExitCode: 3, Stderr: []byte("unexpected command " + cmd.String())}, nil
}

type world struct {
	c   client.Client
	vg  *vgLVs
	r   *Reconciler
	rec *events.FakeRecorder
}

func newWorld(t *testing.T, objs ...client.Object) *world {
	scheme, err := driver.New(false).Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&topolvmv1.LogicalVolume{}).Build()
	vg := &vgLVs{lvs: map[string]uint64{}, lockedBy: map[string]bool{}}
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Client: c, Node: "node-a", Names: driver.New(false), Events: rec,
		Lockspace: func(name string) (lockspace.LVM, error) {
			if name != "san" {
				return lockspace.LVM{}, fmt.Errorf("not in the lockspace of %s", name)
			}
			return lockspace.LVM{Runner: lvm.Runner{Exec: vg}, HostID: 3}, nil
		}}
	return &world{c: c, vg: vg, r: r, rec: rec}
}

func sharedLV(name, worker string) *topolvmv1.LogicalVolume {
	return &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid"),
		Annotations: map[string]string{driver.SharedVolumeGroupAnnotation: "san", driver.SharedWorkerAnnotation: worker},
		Finalizers:  []string{"topolvm.io/logicalvolume"}},
		Spec: topolvmv1.LogicalVolumeSpec{Name: name, DeviceClass: "vm-disks", Size: resource.MustParse("64Mi")}}
}

func (w *world) reconcile(t *testing.T, name string) ctrl.Result {
	t.Helper()
	res, err := w.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (w *world) get(t *testing.T, name string) *topolvmv1.LogicalVolume {
	t.Helper()
	lv := &topolvmv1.LogicalVolume{}
	if err := w.c.Get(context.Background(), types.NamespacedName{Name: name}, lv); err != nil {
		t.Fatal(err)
	}
	return lv
}

// TestWorkerCreatesAndAdopts: the worker creates the LV inactive, named after the object's uid, and a
// second pass (a crash before the status write) adopts it instead of creating another.
func TestWorkerCreatesAndAdopts(t *testing.T) {
	w := newWorld(t, sharedLV("v1", "node-a"))
	w.reconcile(t, "v1")
	lv := w.get(t, "v1")
	if lv.Status.VolumeID != "v1-uid" || lv.Status.CurrentSize.Value() != 64<<20 || w.vg.lvs["v1-uid"] == 0 {
		t.Fatalf("status %+v, LVs %v; want volume ID v1-uid of 64Mi and the LV made", lv.Status, w.vg.lvs)
	}
	if !slices.Equal(w.vg.ran, []string{"lvs", "lvcreate", "lvs"}) {
		t.Errorf("commands %v", w.vg.ran)
	}

	w2 := newWorld(t, sharedLV("v2", "node-a"))
	w2.vg.lvs["v2-uid"] = 64 << 20 // made before a crash
	w2.reconcile(t, "v2")
	if lv := w2.get(t, "v2"); lv.Status.VolumeID != "v2-uid" || slices.Contains(w2.vg.ran, "lvcreate") {
		t.Errorf("status %+v after commands %v; want the existing LV adopted, no lvcreate", lv.Status, w2.vg.ran)
	}
}

// TestOnlyTheWorkerActs: a volume whose worker is another node, or whose status names another LV, gets no
// lvm2 command from this node.
func TestOnlyTheWorkerActs(t *testing.T) {
	forged := sharedLV("v3", "node-a")
	forged.Status.VolumeID = "someone-elses-lv"
	w := newWorld(t, sharedLV("v1", "node-b"), forged)
	w.reconcile(t, "v1")
	w.reconcile(t, "v3")
	if len(w.vg.ran) != 0 {
		t.Fatalf("commands %v for volumes this node does not own", w.vg.ran)
	}
	if lv := w.get(t, "v3"); lv.Status.Code != int32(codes.PermissionDenied) || !strings.Contains(lv.Status.Message, "neither grows nor removes") {
		t.Errorf("a forged volume ID: status %+v, want PermissionDenied saying the agent leaves it alone", lv.Status)
	}
}

// TestRemovalWaitsForEveryNode: an LV another node has active is not removed (lvmlockd refuses): the object
// keeps its finalizer, an event says why, and the removal is retried; once released it goes.
func TestRemovalWaitsForEveryNode(t *testing.T) {
	lv := sharedLV("v1", "node-a")
	lv.Status.VolumeID = "v1-uid"
	now := metav1.NewTime(time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC))
	lv.DeletionTimestamp = &now
	w := newWorld(t, lv)
	w.vg.lvs["v1-uid"] = 64 << 20
	w.vg.lockedBy["v1-uid"] = true
	res := w.reconcile(t, "v1")
	if res.RequeueAfter == 0 || w.vg.lvs["v1-uid"] == 0 || len(w.get(t, "v1").Finalizers) != 1 {
		t.Fatalf("result %+v, LVs %v: want the LV kept, the finalizer kept, a retry", res, w.vg.lvs)
	}
	select {
	case e := <-w.rec.Events:
		if !strings.Contains(e, "VolumeInUse") || !strings.Contains(e, "another node holds it") {
			t.Errorf("event %q, want VolumeInUse naming another node's lock", e)
		}
	default:
		t.Error("no event for the refused removal")
	}
	w.vg.lockedBy["v1-uid"] = false
	w.reconcile(t, "v1")
	if _, ok := w.vg.lvs["v1-uid"]; ok {
		t.Fatalf("LV still there after the other node released it")
	}
	err := w.c.Get(context.Background(), types.NamespacedName{Name: "v1"}, &topolvmv1.LogicalVolume{})
	if err == nil {
		t.Error("the LogicalVolume is still there after its LV was removed")
	}
}
