package classes

import (
	"context"
	"maps"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/operator/names"
)

// TestApply_Adoption: a class generated for an owner in Adopt is taken over in place (same object, new
// ownership labels) when its parameters match, reported as taken and left alone when they differ (a
// StorageClass's parameters cannot change, and it is never deleted to adopt it); an owner in Yield keeps its
// class without a report; anyone else's class is taken, as before.
func TestApply_Adoption(t *testing.T) {
	cluster := Owner{Kind: names.KindCluster, Namespace: "ns", Name: "c"}
	set := Owner{Kind: names.KindNodeSet, Namespace: "ns", Name: "s"}
	d := driver.New(false)
	want := StorageClass{Name: "lvms-vg1", Provisioner: d.Driver(), DeviceClass: "vg1", FSType: "xfs",
		ReclaimPolicy: corev1.PersistentVolumeReclaimDelete, VolumeBindingMode: storagev1.VolumeBindingWaitForFirstConsumer}
	existing := func(params map[string]string) *storagev1.StorageClass {
		reclaim, binding := want.ReclaimPolicy, want.VolumeBindingMode
		labels := cluster.Labels()
		labels[names.DeviceClassLabel] = "vg1"
		return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: want.Name, UID: "uid-1", Labels: labels},
			Provisioner: d.Driver(), Parameters: params, ReclaimPolicy: &reclaim, VolumeBindingMode: &binding}
	}
	same := map[string]string{d.DeviceClassParam(): "vg1", names.FSTypeParameter: "xfs"}
	other := map[string]string{d.DeviceClassParam(): "vg1", names.FSTypeParameter: "ext4"}
	cases := []struct {
		name        string
		params      map[string]string
		adopt       []Owner
		yield       []Owner
		wantOwner   Owner
		wantTaken   string
		wantSameUID bool
	}{
		{"adopted in place", same, []Owner{cluster}, nil, set, "", true},
		{"parameters differ: reported, left alone", other, []Owner{cluster}, nil, cluster, "cannot be adopted in place: parameters", true},
		{"yielded: left alone, not reported", same, nil, []Owner{cluster}, cluster, "", true},
		{"no hand-over: taken, as before", same, nil, nil, cluster, "already exists and belongs to LVMCluster ns/c", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			if err := storagev1.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(existing(maps.Clone(tc.params))).Build()
			res, err := Apply(context.Background(), c, Set{Owner: set, Driver: d, StorageClasses: []StorageClass{want}, Adopt: tc.adopt, Yield: tc.yield})
			if err != nil {
				t.Fatalf("apply: %v", err)
			}
			taken := strings.Join(res.Taken, "\n")
			if (tc.wantTaken == "") != (taken == "") || !strings.Contains(taken, tc.wantTaken) {
				t.Errorf("taken %q, want %q", taken, tc.wantTaken)
			}
			var got storagev1.StorageClass
			if err := c.Get(context.Background(), client.ObjectKey{Name: want.Name}, &got); err != nil {
				t.Fatalf("the StorageClass is gone: %v", err)
			}
			if !ownedBy(got.Labels, tc.wantOwner) || (got.UID == "uid-1") != tc.wantSameUID {
				t.Errorf("StorageClass labels %v UID %s, want owned by %s, same object", got.Labels, got.UID, tc.wantOwner)
			}
			if !maps.Equal(got.Parameters, tc.params) {
				t.Errorf("parameters %v, want unchanged %v", got.Parameters, tc.params)
			}
		})
	}
}
