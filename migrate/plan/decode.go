package plan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
)

// Objects are the objects of a file given to `lvms migrate plan -f`.
type Objects struct {
	Clusters []lvmv1.LVMCluster
	// StorageClasses and SnapshotClasses, when the file has any (for example the output of
	// `kubectl get lvmcluster,storageclass,volumesnapshotclass -A -o yaml`), stand for the cluster's classes.
	StorageClasses  []storagev1.StorageClass
	SnapshotClasses []snapshotv1.VolumeSnapshotClass
}

// Existing returns the file's classes as the cluster's, or nil when the file has none.
func (o *Objects) Existing() *Existing {
	if len(o.StorageClasses) == 0 && len(o.SnapshotClasses) == 0 {
		return nil
	}
	return &Existing{StorageClasses: o.StorageClasses, SnapshotClasses: o.SnapshotClasses}
}

// Decode reads YAML or JSON: one object, several YAML documents, or a List as kubectl prints it. An
// LVMCluster field the v1alpha1 API does not know is an error, because a misspelt field would silently
// drop out of the plan; objects of other kinds are ignored.
func Decode(data []byte) (*Objects, error) {
	out := &Objects{}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for doc := 1; ; doc++ {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d is not YAML or JSON: %w", doc, err)
		}
		if m == nil {
			continue
		}
		if err := out.add(&unstructured.Unstructured{Object: m}, fmt.Sprintf("document %d", doc)); err != nil {
			return nil, err
		}
	}
}

func (o *Objects) add(u *unstructured.Unstructured, where string) error {
	if u.IsList() {
		i := 0
		return u.EachListItem(func(item runtime.Object) error {
			i++
			iu, ok := item.(*unstructured.Unstructured)
			if !ok {
				return fmt.Errorf("%s, item %d is not an object", where, i)
			}
			return o.add(iu, fmt.Sprintf("%s, item %d", where, i))
		})
	}
	gvk := u.GroupVersionKind()
	switch {
	case gvk.Group == lvmv1.GroupVersion.Group && gvk.Kind == "LVMCluster":
		if gvk.Version != lvmv1.GroupVersion.Version {
			return fmt.Errorf("%s: LVMCluster has apiVersion %s; lvms migrate plan reads %s", where, u.GetAPIVersion(), lvmv1.GroupVersion)
		}
		var c lvmv1.LVMCluster
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &c, true); err != nil {
			return fmt.Errorf("%s: LVMCluster %s: %s (check the spelling against the v1alpha1 API)", where, u.GetName(), strings.TrimSpace(err.Error()))
		}
		o.Clusters = append(o.Clusters, c)
	case gvk.Group == storagev1.GroupName && gvk.Kind == "StorageClass":
		var sc storagev1.StorageClass
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &sc); err != nil {
			return fmt.Errorf("%s: StorageClass %s: %w", where, u.GetName(), err)
		}
		o.StorageClasses = append(o.StorageClasses, sc)
	case gvk.Group == snapshotv1.GroupName && gvk.Kind == "VolumeSnapshotClass":
		var vsc snapshotv1.VolumeSnapshotClass
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &vsc); err != nil {
			return fmt.Errorf("%s: VolumeSnapshotClass %s: %w", where, u.GetName(), err)
		}
		o.SnapshotClasses = append(o.SnapshotClasses, vsc)
	}
	return nil
}

// Select picks the LVMCluster to plan: the one named name, or the only one when name is empty. from says
// where the clusters came from, for the error.
func Select(clusters []lvmv1.LVMCluster, name, from string) (*lvmv1.LVMCluster, error) {
	var found []string
	for i := range clusters {
		if name != "" && clusters[i].Name == name {
			return &clusters[i], nil
		}
		found = append(found, clusters[i].Namespace+"/"+clusters[i].Name)
	}
	switch {
	case name != "" && len(found) == 0:
		return nil, fmt.Errorf("no LVMCluster named %s in %s: it has no LVMCluster", name, from)
	case name != "":
		return nil, fmt.Errorf("no LVMCluster named %s in %s; it has %s", name, from, strings.Join(found, ", "))
	case len(found) == 0:
		return nil, fmt.Errorf("no LVMCluster in %s", from)
	case len(found) > 1:
		return nil, fmt.Errorf("%s has %d LVMClusters (%s): name the one to plan", from, len(found), strings.Join(found, ", "))
	}
	return &clusters[0], nil
}
