package provisioner_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/benchsmoke"
	"github.com/lvms-dev/lvms/e2e/csidriver"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator/csicontroller"
	"github.com/lvms-dev/lvms/operator/provisioner"
)

// BenchmarkProvisioningLatency reports the median and 90th percentile time from a PVC's creation (with
// its selected node, as the scheduler leaves it) to its PV's creation, over 100 volumes provisioned one
// after the other, with the controller's production backoff. envtest API server; the node agents run in
// process on lvmsim, so this is the control-plane path (provisioner → CreateVolume → LogicalVolume → node
// reconciler → status → PV), not lvm2's own time. Under make test's smoke (benchsmoke) it provisions 10; a
// claim refused ends it at once, naming the claim and why.
func BenchmarkProvisioningLatency(b *testing.B) {
	testenv.Require(b)
	names := driver.New(false)
	ns := env.Namespace(b)
	nodes := []string{"bench-a", "bench-b"}
	csidriver.Start(b, env.Config, csidriver.Options{Names: names, Nodes: nodes, Backoff: csicontroller.DefaultBackoff(),
		Setup: func(mgr manager.Manager, d *csidriver.Driver) error {
			return provisioner.New(provisioner.Options{Names: names, CSI: d.Controller}).SetupWithManager(mgr)
		}})
	sc := newBenchClass(b, names)
	refusals := testenv.WatchRefusals(b, env.Config, ns)
	ctx := context.Background()
	volumes := benchsmoke.Size(100, 10)
	for range b.N {
		var lat []time.Duration
		for i := range volumes {
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "bench-",
				Annotations: map[string]string{driver.SelectedNodeAnnotation: nodes[i%2]}},
				Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("64Mi")}}}}
			start := time.Now()
			if err := env.Client.Create(ctx, pvc); err != nil {
				b.Fatal(err)
			}
			for {
				if err := env.Client.Get(ctx, types.NamespacedName{Name: "pvc-" + string(pvc.UID)}, &corev1.PersistentVolume{}); err == nil {
					break
				}
				if why := refusals.First(); why != "" {
					b.Fatalf("stopped waiting: this can never complete (%d of %d PVs): %s", i, volumes, why)
				}
				if time.Since(start) > time.Minute {
					b.Fatalf("no PV for %s after a minute", pvc.Name)
				}
				time.Sleep(2 * time.Millisecond)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[volumes/2].Milliseconds()), "ms-median")
		b.ReportMetric(float64(lat[volumes*9/10].Milliseconds()), "ms-p90")
		fmt.Printf("CreateVolume→PV latency over %d volumes: median %v, p90 %v, max %v\n", volumes, lat[volumes/2], lat[volumes*9/10], lat[volumes-1])
	}
}

func newBenchClass(b *testing.B, names driver.Names) string {
	testenv.Require(b)
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-"}, Provisioner: names.Driver(),
		Parameters: map[string]string{names.DeviceClassParam(): "thin"}, VolumeBindingMode: &mode}
	if err := env.Client.Create(context.Background(), sc); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = env.Client.Delete(context.Background(), sc) })
	return sc.Name
}
