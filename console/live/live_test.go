package live_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
	"github.com/lvms-dev/lvms/console/live"
	"github.com/lvms-dev/lvms/e2e/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// The prepared state uses cluster-scoped names (nodes, StorageClasses, LogicalVolumes), so it is written once
// per control plane, into one namespace. The test plays the operator and the node agents.
// clk is the one clock of the prepared state and of what reads it: the real one, because the API server that
// stores the state (and stamps what it creates) runs on it. Times in the state are relative to it, so the
// test gives the same verdict on any date.
var clk clock.PassiveClock = clock.RealClock{}

var (
	prepareOnce sync.Once
	preparedNS  = "lvms-console"
	prepareErr  error
)

func prepare(t *testing.T) {
	t.Helper()
	testenv.Require(t)
	prepareOnce.Do(func() {
		ctx := context.Background()
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: preparedNS}}); err != nil {
			prepareErr = err
			return
		}
		prepareErr = consoletest.Apply(ctx, env.Client, consoletest.PreparedAt(preparedNS, clk.Now()))
	})
	if prepareErr != nil {
		t.Fatalf("write the prepared state: %v", prepareErr)
	}
}

func TestSource_SnapshotOfPreparedState(t *testing.T) {
	testenv.Require(t)
	prepare(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := live.New(ctx, env.Config, live.Options{Cluster: "envtest", Clock: clk})
	snap, err := src.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !snap.Installed || snap.Cluster != "envtest" {
		t.Errorf("installed %v cluster %q", snap.Installed, snap.Cluster)
	}
	v, err := console.Node(snap, consoletest.NodeB)
	if err != nil {
		t.Fatal(err)
	}
	if v.State != "Degraded" || len(v.Differences) == 0 || v.Differences[0].Explanation.Code != "NotFound" {
		t.Errorf("worker-b: state %s, differences %+v; want Degraded with the NotFound path first", v.State, v.Differences)
	}
	if !slices.ContainsFunc(snap.Hidden, func(h console.HiddenKind) bool { return strings.HasPrefix(h.Resource, "volumesnapshotclasses") }) {
		t.Errorf("hidden = %+v, want VolumeSnapshotClasses reported as not served", snap.Hidden)
	}
	vols := console.Volumes(snap)
	if len(vols) != 2 || vols[1].Pods == nil {
		t.Errorf("volumes = %+v, want both LogicalVolumes, one with its pod", vols)
	}
	again, err := src.Snapshot(ctx)
	if err != nil || again != snap {
		t.Errorf("a second snapshot without changes should be the same object (err %v)", err)
	}
}

func TestSource_LVMNodeStatusChangeIsSeen(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := &lvmv2.LVMNode{ObjectMeta: metav1.ObjectMeta{Name: "live-node", Namespace: ns}, Spec: lvmv2.LVMNodeSpec{}}
	if err := env.Client.Create(ctx, n); err != nil {
		t.Fatal(err)
	}
	src := live.New(ctx, env.Config, live.Options{})
	if _, err := src.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	changes := src.Subscribe(ctx)
	n.Status = lvmv2.LVMNodeStatus{State: lvmv2.StateDegraded, Message: "status written by the test"}
	if err := env.Client.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case <-changes:
		case <-deadline:
			t.Fatal("the status change was not seen within 30s")
		}
		snap, err := src.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v, err := console.Node(snap, "live-node"); err == nil && v.Message == "status written by the test" {
			return
		}
	}
}

func TestSource_ActsAsTheCaller(t *testing.T) {
	testenv.Require(t)
	prepare(t)
	ns := env.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tests := []struct {
		name       string
		rules      []rbacv1.PolicyRule
		wantErr    string
		wantHidden []string
	}{
		{name: "no permissions", wantErr: "may not list lvmnodes.lvm.topolvm.io"},
		{name: "everything but LVMNodes", wantErr: "may not list lvmnodes.lvm.topolvm.io",
			rules: withoutResource(live.ViewerRules(), "lvmnodes")},
		{name: "viewer without events", rules: withoutResource(live.ViewerRules(), "events"), wantHidden: []string{"events"}},
		{name: "viewer", rules: live.ViewerRules()},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			token, err := consoletest.UserToken(ctx, env.Config, env.Client, ns, "user-"+string(rune('a'+i)), tc.rules)
			if err != nil {
				t.Fatal(err)
			}
			pool := live.NewPool(ctx, env.Config, live.Options{}, 0)
			src, _ := pool.For(ctx, token)
			snap, err := src.Snapshot(ctx)
			if tc.wantErr != "" {
				var ae *console.AccessError
				if !errors.As(err, &ae) || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "user-") {
					t.Fatalf("err = %v, want an AccessError naming the user and %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var hidden []string
			for _, h := range snap.Hidden {
				if !strings.HasPrefix(h.Resource, "volumesnapshotclasses") {
					hidden = append(hidden, h.Resource)
				}
			}
			if !slices.Equal(hidden, tc.wantHidden) {
				t.Errorf("hidden = %v, want %v", hidden, tc.wantHidden)
			}
			if !strings.Contains(snap.User, "user-") {
				t.Errorf("user = %q, want the service account", snap.User)
			}
			if _, err := console.Node(snap, consoletest.NodeB); err != nil {
				t.Errorf("a viewer should see worker-b: %v", err)
			}
		})
	}
	pool := live.NewPool(ctx, env.Config, live.Options{}, 0)
	src, _ := pool.For(ctx, "not-a-valid-token")
	_, err := src.Snapshot(ctx)
	var ae *console.AccessError
	if !errors.As(err, &ae) || !ae.Unauthorized {
		t.Errorf("invalid token: err = %v, want an unauthorized AccessError", err)
	}
}

func withoutResource(rules []rbacv1.PolicyRule, resource string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, r := range rules {
		r.Resources = slices.DeleteFunc(slices.Clone(r.Resources), func(s string) bool { return s == resource })
		if len(r.Resources) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// A cluster without the LVMS CRDs: a control plane of its own, started without them.
func TestSource_NotInstalled(t *testing.T) {
	testenv.Require(t)
	dir, err := testenv.Assets()
	if err != nil {
		t.Fatal(err)
	}
	bare := &envtest.Environment{BinaryAssetsDirectory: dir}
	cfg, err := bare.Start()
	if err != nil {
		t.Fatalf("start a control plane without CRDs: %v", err)
	}
	t.Cleanup(func() { _ = bare.Stop() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	snap, err := live.New(ctx, cfg, live.Options{}).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Installed {
		t.Error("Installed = true on a cluster without the LVMS CRDs")
	}
	if o := console.BuildOverview(snap); o.Installed || len(o.Nodes) != 0 {
		t.Errorf("overview = %+v", o)
	}
}

// The source reads LogicalVolumeGroupSnapshots from the API server (the CRD is installed here) and joins
// the labelled member LogicalVolumes.
func TestSource_GroupSnapshots(t *testing.T) {
	testenv.Require(t)
	prepare(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	member := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: "live-group-0a1",
		Labels: map[string]string{topolvmv1.GroupSnapshotMemberLabel: "live-group"}},
		Spec: topolvmv1.LogicalVolumeSpec{Name: "live-group-0a1", NodeName: consoletest.NodeA, DeviceClass: "fast",
			Size: resource.MustParse("1Gi"), Source: "pvc-0a1", AccessType: "ro"}}
	g := &topolvmv1.LogicalVolumeGroupSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "live-group"},
		Spec: topolvmv1.LogicalVolumeGroupSnapshotSpec{NodeName: consoletest.NodeA, DeviceClass: "fast",
			Members: []topolvmv1.GroupSnapshotMember{{Source: "pvc-0a1", Snapshot: "live-group-0a1"}}}}
	for _, o := range []client.Object{member, g} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	g.Status = topolvmv1.LogicalVolumeGroupSnapshotStatus{Phase: topolvmv1.GroupSnapshotRefused, Reason: "ThickVolume", Message: "refused by the test"}
	if err := env.Client.Status().Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	snap, err := live.New(ctx, env.Config, live.Options{Clock: clk}).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, err := console.Node(snap, consoletest.NodeA)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(v.GroupSnapshots, func(g console.GroupSnapshotView) bool { return g.Name == "live-group" })
	if i < 0 {
		t.Fatalf("worker-a's group snapshots %+v lack live-group", v.GroupSnapshots)
	}
	got := v.GroupSnapshots[i]
	if got.Phase != "Refused" || got.Message != "refused by the test" || len(got.Members) != 1 || !got.Members[0].Exists ||
		got.Members[0].SourcePVC != preparedNS+"/data-db-0" {
		t.Errorf("live-group = %+v", got)
	}
}
