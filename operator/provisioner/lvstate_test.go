package provisioner

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/lvms-dev/lvms/api"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// The alert LogicalVolumeStuck reads how long the oldest pending, failed or deleting LogicalVolume has
// waited per node and device class; ready ones are only counted.
func TestLVStateCollector_CountsAndOldestWaitingPerNode(t *testing.T) {
	at := func(min int) metav1.Time { return metav1.NewTime(time.Date(2031, 1, 1, 12, min, 0, 0, time.UTC)) }
	lv := func(name, node string, created metav1.Time, mutate func(*topolvmv1.LogicalVolume)) client.Object {
		o := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: created},
			Spec: topolvmv1.LogicalVolumeSpec{NodeName: node, DeviceClass: "ssd"}}
		if mutate != nil {
			mutate(o)
		}
		return o
	}
	ready := func(o *topolvmv1.LogicalVolume) { o.Status.VolumeID = "v-" + o.Name }
	deleting := func(o *topolvmv1.LogicalVolume) {
		ready(o)
		ts := at(30)
		o.DeletionTimestamp, o.Finalizers = &ts, []string{"topolvm.io/logicalvolume"}
	}
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(
		lv("a", "node-1", at(0), ready),
		lv("b", "node-1", at(5), nil),
		lv("c", "node-1", at(2), nil), // the older pending one on node-1
		lv("d", "node-2", at(1), func(o *topolvmv1.LogicalVolume) { o.Status.Code, o.Status.Message = 8, "no space" }),
		lv("e", "node-2", at(3), deleting),
	).Build()
	unix := func(t metav1.Time) string { return strconv.FormatFloat(float64(t.Unix()), 'g', -1, 64) }
	want := `
# HELP lvms_logical_volume_oldest_timestamp_seconds When the oldest LogicalVolume still in a waiting state entered it: creation for pending and failed, deletion for deleting. ` + "`time() - this`" + ` is how long it has waited.
# TYPE lvms_logical_volume_oldest_timestamp_seconds gauge
lvms_logical_volume_oldest_timestamp_seconds{device_class="ssd",node="node-1",state="pending"} ` + unix(at(2)) + `
lvms_logical_volume_oldest_timestamp_seconds{device_class="ssd",node="node-2",state="deleting"} ` + unix(at(30)) + `
lvms_logical_volume_oldest_timestamp_seconds{device_class="ssd",node="node-2",state="failed"} ` + unix(at(1)) + `
# HELP lvms_logical_volumes LogicalVolumes by node, device class and state (pending, ready, failed, deleting).
# TYPE lvms_logical_volumes gauge
lvms_logical_volumes{device_class="ssd",node="node-1",state="pending"} 2
lvms_logical_volumes{device_class="ssd",node="node-1",state="ready"} 1
lvms_logical_volumes{device_class="ssd",node="node-2",state="deleting"} 1
lvms_logical_volumes{device_class="ssd",node="node-2",state="failed"} 1
`
	if err := testutil.CollectAndCompare(lvStateCollector{p: &Provisioner{client: c}}, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
