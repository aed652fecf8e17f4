package metrics_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi/proto"
	"github.com/lvms-dev/lvms/nodeagent/metrics"
)

func watchMessage() *proto.WatchResponse {
	return &proto.WatchResponse{FreeBytes: 100, Items: []*proto.WatchItem{
		{DeviceClass: "ssd", FreeBytes: 100, SizeBytes: 1000},
		{DeviceClass: "thin", FreeBytes: 50, SizeBytes: 2000,
			ThinPool: &proto.ThinPoolItem{DataPercent: 12.5, MetadataPercent: 3, OverprovisionBytes: 7000, SizeBytes: 1500}},
	}}
}

func TestExporter_Metrics(t *testing.T) {
	e := metrics.NewExporter(nil, nil, "n1", driver.New(false))
	reg := prometheus.NewRegistry()
	if err := e.Register(reg); err != nil {
		t.Fatal(err)
	}
	e.Observe(watchMessage())
	want := `
# HELP topolvm_thinpool_data_percent LVM thin pool data usage percent
# TYPE topolvm_thinpool_data_percent gauge
topolvm_thinpool_data_percent{device_class="thin",node="n1"} 12.5
# HELP topolvm_thinpool_overprovisioned_available LVM thin pool bytes available with overprovisioning
# TYPE topolvm_thinpool_overprovisioned_available gauge
topolvm_thinpool_overprovisioned_available{device_class="thin",node="n1"} 7000
# HELP topolvm_volumegroup_available_bytes LVM VG available bytes under lvmd management
# TYPE topolvm_volumegroup_available_bytes gauge
topolvm_volumegroup_available_bytes{device_class="ssd",node="n1"} 100
topolvm_volumegroup_available_bytes{device_class="thin",node="n1"} 50
# HELP topolvm_volumegroup_size_bytes LVM VG size bytes under lvmd management
# TYPE topolvm_volumegroup_size_bytes gauge
topolvm_volumegroup_size_bytes{device_class="ssd",node="n1"} 1000
topolvm_volumegroup_size_bytes{device_class="thin",node="n1"} 2000
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "topolvm_thinpool_data_percent", "topolvm_thinpool_overprovisioned_available",
		"topolvm_volumegroup_available_bytes", "topolvm_volumegroup_size_bytes"); err != nil {
		t.Error(err)
	}
}

func TestExporter_Annotate(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		names := driver.New(legacy)
		scheme, _ := names.Scheme()
		c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1",
			Annotations: map[string]string{"other": "kept"}}}).Build()
		e := metrics.NewExporter(c, nil, "n1", names)
		if err := e.Annotate(context.Background(), watchMessage()); err != nil {
			t.Fatal(err)
		}
		n := &corev1.Node{}
		if err := c.Get(context.Background(), types.NamespacedName{Name: "n1"}, n); err != nil {
			t.Fatal(err)
		}
		p := "capacity." + names.Driver() + "/"
		want := map[string]string{p + "00default": "100", p + "ssd": "100", p + "thin": "7000", "other": "kept"}
		for k, v := range want {
			if n.Annotations[k] != v {
				t.Errorf("legacy=%v: annotation %s = %q, want %q (all: %v)", legacy, k, n.Annotations[k], v, n.Annotations)
			}
		}
	}
}
