package plan_test

import (
	"slices"
	"testing"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/lvms-dev/lvms/migrate/plan"
	"github.com/lvms-dev/lvms/operator/names"
)

func ownedMeta(name string, isDefault bool) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name,
		Annotations: map[string]string{names.DefaultClassAnnotation: map[bool]string{true: "true", false: "false"}[isDefault]},
		Labels: map[string]string{names.ManagedByLabel: names.ManagedByValue, names.OwnerKindLabel: names.KindCluster,
			names.OwnerNamespaceLabel: "ns", names.OwnerNameLabel: "c"}}
}

func sc(name string, isDefault bool) storagev1.StorageClass {
	return storagev1.StorageClass{ObjectMeta: ownedMeta(name, isDefault)}
}

func vsc(name string) snapshotv1.VolumeSnapshotClass {
	return snapshotv1.VolumeSnapshotClass{ObjectMeta: ownedMeta(name, false)}
}

// TestBuild_ExistingClasses: the classes the cluster has decide which names are missing or taken and
// whether the default moves.
func TestBuild_ExistingClasses(t *testing.T) {
	thinAndThick := classes("[{name: a, default: true, thinPoolConfig: {name: p, overprovisionRatio: 2}}, {name: b}]")
	cases := []struct {
		name     string
		spec     string
		existing plan.Existing
		want     []plan.Code
		lossy    bool
	}{
		{"all present, default unchanged", thinAndThick,
			plan.Existing{StorageClasses: []storagev1.StorageClass{sc("lvms-a", true), sc("lvms-b", false)}, SnapshotClasses: []snapshotv1.VolumeSnapshotClass{vsc("lvms-a")}},
			nil, false},
		{"classes missing", thinAndThick, plan.Existing{},
			[]plan.Code{plan.CodeSnapshotClassMissing, plan.CodeStorageClassMissing, plan.CodeStorageClassMissing}, false},
		{"another StorageClass is the default", thinAndThick,
			plan.Existing{StorageClasses: []storagev1.StorageClass{sc("lvms-a", false), sc("lvms-b", false), {ObjectMeta: metav1.ObjectMeta{Name: "gp3",
				Annotations: map[string]string{names.DefaultClassAnnotation: "true"}}}}, SnapshotClasses: []snapshotv1.VolumeSnapshotClass{vsc("lvms-a")}},
			[]plan.Code{plan.CodeDefaultHeldElsewhere}, false},
		{"the default moves to the class v1 marks", thinAndThick,
			plan.Existing{StorageClasses: []storagev1.StorageClass{sc("lvms-a", false), sc("lvms-b", true)}, SnapshotClasses: []snapshotv1.VolumeSnapshotClass{vsc("lvms-a")}},
			[]plan.Code{plan.CodeDefaultClassChanges}, true},
		{"no class stays the default", classes("[{name: a}, {name: b}]"),
			plan.Existing{StorageClasses: []storagev1.StorageClass{sc("lvms-a", true), sc("lvms-b", false)}},
			[]plan.Code{plan.CodeDefaultClassChanges}, true},
		{"a name belongs to another LVMNodeSet", classes("[{name: a}]"),
			plan.Existing{StorageClasses: []storagev1.StorageClass{{ObjectMeta: metav1.ObjectMeta{Name: "lvms-a",
				Labels: map[string]string{names.OwnerKindLabel: names.KindNodeSet, names.OwnerNamespaceLabel: "ns", names.OwnerNameLabel: "other"}}}}},
			[]plan.Code{plan.CodeImplicitDefault, plan.CodeClassTaken}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := plan.Build(plan.Input{Cluster: cluster(t, tc.spec), Existing: &tc.existing})
			if err != nil {
				t.Fatal(err)
			}
			var got []plan.Code
			for _, f := range p.Findings {
				got = append(got, f.Code)
			}
			if !slices.Equal(got, tc.want) || p.Lossy() != tc.lossy {
				t.Errorf("findings %v (lossy %v), want %v (lossy %v):\n%+v", got, p.Lossy(), tc.want, tc.lossy, p.Findings)
			}
			if !p.ClassesKnown {
				t.Error("ClassesKnown is false although classes were given")
			}
		})
	}
}
