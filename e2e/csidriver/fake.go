package csidriver

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	mountutil "k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/nodeagent/csinode"
	"github.com/lvms-dev/lvms/nodeagent/logicalvolume"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi"
	"github.com/lvms-dev/lvms/nodeagent/metrics"
	"github.com/lvms-dev/lvms/operator/csicontroller"
)

// FakeOptions configure StartFake.
type FakeOptions struct {
	Names  driver.Names
	Node   string
	Runner lvm.Runner
	Config *lvmd.Config
	// Mounter and Exec default to the real ones.
	Mounter mountutil.Interface
	Exec    utilexec.Interface
	// Objects exist before the driver starts, as they are (their UIDs kept): another driver's state.
	Objects []client.Object
}

// StartFake assembles the driver for one node without an API server, for the VM lane: LogicalVolumes
// live in controller-runtime's fake client (which this wraps to assign UIDs and creation times, as the
// API server does), and a loop plays the node agent's controller manager, reconciling every
// LogicalVolume of the node every few milliseconds. lvm2, mkfs and mount are whatever Runner, Exec and
// Mounter run — real ones in the VM.
func StartFake(t testing.TB, o FakeOptions) *Driver {
	t.Helper()
	scheme, err := o.Names.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	withStatus := []client.Object{&topolvmv1.LogicalVolume{}}
	if _, _, err := scheme.ObjectKinds(&topolvmv1.LogicalVolumeGroupSnapshot{}); err == nil {
		// Group snapshots exist only under topolvm.io, not the legacy group.
		withStatus = append(withStatus, &topolvmv1.LogicalVolumeGroupSnapshot{})
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(withStatus...).
		WithObjects(append([]client.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: o.Node, Labels: map[string]string{o.Names.TopologyKey(): o.Node}}}}, o.Objects...)...).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			obj.SetUID(types.UID(uuid.NewString()))
			obj.SetCreationTimestamp(metav1.Now())
			return c.Create(ctx, obj, opts...)
		}}).Build()
	lvmdClient, stop, err := lvmdapi.InProcess(lvmdapi.NewServer(o.Runner, lvmdapi.StaticConfig(o.Config)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	t.Cleanup(func() { cancel(); <-done; <-done; stop() })

	exporter := metrics.NewExporter(c, lvmdClient, o.Node, o.Names)
	go func() { _ = exporter.Run(ctx); done <- struct{}{} }()
	rec := logicalvolume.New(c, lvmdClient, o.Node, o.Names)
	go func() {
		defer func() { done <- struct{}{} }()
		for ctx.Err() == nil {
			list := &topolvmv1.LogicalVolumeList{}
			if err := c.List(ctx, list); err == nil {
				for _, lv := range list.Items {
					if _, err := rec.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: lv.Name}}); err != nil && ctx.Err() == nil {
						t.Logf("reconcile LogicalVolume %s: %v", lv.Name, err)
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(25 * time.Millisecond):
			}
		}
	}()
	d := &Driver{Names: o.Names, Client: c,
		Identity: csinode.NewIdentity(o.Names.Driver(), "test", nil),
		Controller: csicontroller.NewController(c, nil, csicontroller.Options{Names: o.Names,
			Backoff: csicontroller.Backoff{Initial: 20 * time.Millisecond, Factor: 2, Cap: time.Second}}),
	}
	d.Nodes = []*Node{{Name: o.Node, LVMD: lvmdClient,
		Service: csinode.NewNode(csinode.Options{NodeName: o.Node, Names: o.Names, Client: c, LVMD: lvmdClient, Mounter: o.Mounter, Exec: o.Exec})}}
	d.waitCapacity(t, c, o.Node)
	return d
}
