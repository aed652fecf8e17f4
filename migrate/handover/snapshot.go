package handover

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/migrate/plan"
	"github.com/lvms-dev/lvms/operator/usage"
)

// classNames are the planned StorageClass and VolumeSnapshotClass names, sorted.
func classNames(p *plan.Plan) (scs, vscs []string) {
	for _, m := range p.Mappings {
		scs = append(scs, m.StorageClass)
		if m.SnapshotClass != "" {
			vscs = append(vscs, m.SnapshotClass)
		}
	}
	slices.Sort(scs)
	slices.Sort(vscs)
	return slices.Compact(scs), slices.Compact(vscs)
}

// observeShared fills in what is the same before and after: volumes, PVs, classes and capacity.
func observeShared(ctx context.Context, c client.Client, s *Snapshot, nodes, scNames, vscNames []string) error {
	d := driver.New(false)
	var lvs topolvmv1.LogicalVolumeList
	if err := c.List(ctx, &lvs); err != nil {
		return fmt.Errorf("list LogicalVolumes: %w", err)
	}
	for _, lv := range lvs.Items {
		if slices.Contains(nodes, lv.Spec.NodeName) {
			s.LogicalVolumes = append(s.LogicalVolumes, LogicalVolume{Name: lv.Name, UID: string(lv.UID), Node: lv.Spec.NodeName,
				DeviceClass: lv.Spec.DeviceClass, Size: lv.Spec.Size.String(), VolumeID: lv.Status.VolumeID})
		}
	}
	slices.SortFunc(s.LogicalVolumes, func(a, b LogicalVolume) int { return strings.Compare(a.Name, b.Name) })
	var pvs corev1.PersistentVolumeList
	if err := c.List(ctx, &pvs); err != nil {
		return fmt.Errorf("list PersistentVolumes: %w", err)
	}
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		if !slices.Contains(scNames, pv.Spec.StorageClassName) {
			continue
		}
		out := PersistentVolume{Name: pv.Name, UID: string(pv.UID), StorageClass: pv.Spec.StorageClassName,
			Node: usage.PVNode(pv, d.TopologyKey()), Capacity: pv.Spec.Capacity.Storage().String()}
		if ref := pv.Spec.ClaimRef; ref != nil {
			out.Claim = ref.Namespace + "/" + ref.Name
		}
		s.PersistentVolumes = append(s.PersistentVolumes, out)
	}
	slices.SortFunc(s.PersistentVolumes, func(a, b PersistentVolume) int { return strings.Compare(a.Name, b.Name) })
	for _, name := range scNames {
		var sc storagev1.StorageClass
		switch err := c.Get(ctx, client.ObjectKey{Name: name}, &sc); {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("get StorageClass %s: %w", name, err)
		}
		s.StorageClasses = append(s.StorageClasses, Class{Name: name, UID: string(sc.UID), Provisioner: sc.Provisioner, Parameters: sc.Parameters})
	}
	for _, name := range vscNames {
		var vsc snapshotv1.VolumeSnapshotClass
		switch err := c.Get(ctx, client.ObjectKey{Name: name}, &vsc); {
		case apierrors.IsNotFound(err), apimeta.IsNoMatchError(err), runtime.IsNotRegisteredError(err):
			continue
		case err != nil:
			return fmt.Errorf("get VolumeSnapshotClass %s: %w", name, err)
		}
		s.SnapshotClasses = append(s.SnapshotClasses, Class{Name: name, UID: string(vsc.UID), Provisioner: vsc.Driver, Parameters: vsc.Parameters})
	}
	for i := range s.Nodes {
		var n corev1.Node
		switch err := c.Get(ctx, client.ObjectKey{Name: s.Nodes[i].Name}, &n); {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("get Node %s: %w", s.Nodes[i].Name, err)
		}
		for k, v := range n.Annotations {
			if dc, ok := d.IsCapacityAnnotation(k); ok {
				if s.Nodes[i].Capacity == nil {
					s.Nodes[i].Capacity = map[string]string{}
				}
				s.Nodes[i].Capacity[dc] = v
			}
		}
	}
	return nil
}

// v1Nodes are the nodes cl manages: those whose LVMVolumeGroupNodeStatus it controls, sorted.
func v1Nodes(ctx context.Context, c client.Client, cl *lvmv1.LVMCluster) ([]lvmv1.LVMVolumeGroupNodeStatus, error) {
	var list lvmv1.LVMVolumeGroupNodeStatusList
	if err := c.List(ctx, &list, client.InNamespace(cl.Namespace)); err != nil {
		return nil, fmt.Errorf("list LVMVolumeGroupNodeStatuses in %s: %w", cl.Namespace, err)
	}
	var out []lvmv1.LVMVolumeGroupNodeStatus
	for _, st := range list.Items {
		for _, ref := range st.OwnerReferences {
			if ref.UID == cl.UID && ref.Controller != nil && *ref.Controller {
				out = append(out, st)
			}
		}
	}
	slices.SortFunc(out, func(a, b lvmv1.LVMVolumeGroupNodeStatus) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// thinPools maps each volume group of the plan to its thin pools.
func thinPools(p *plan.Plan) map[string][]string {
	out := map[string][]string{}
	for _, m := range p.Mappings {
		if m.ThinPool != "" {
			out[m.VolumeGroup] = append(out[m.VolumeGroup], m.ThinPool)
		}
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}

// observeV1 is the snapshot of what cl's node agents report. v1 does not report thin pools, so they come
// from the plan (the pool each thin device class names).
func observeV1(ctx context.Context, c client.Client, cl *lvmv1.LVMCluster, p *plan.Plan) (Snapshot, error) {
	var s Snapshot
	statuses, err := v1Nodes(ctx, c, cl)
	if err != nil {
		return s, err
	}
	pools := thinPools(p)
	planned := map[string]bool{}
	for _, m := range p.Mappings {
		planned[m.VolumeGroup] = true
	}
	for _, st := range statuses {
		n := NodeStorage{Name: st.Name, VolumeGroups: []VolumeGroup{}}
		for _, vg := range st.Spec.LVMVGStatus {
			if !planned[vg.Name] {
				continue
			}
			n.VolumeGroups = append(n.VolumeGroups, VolumeGroup{Name: vg.Name, Devices: sorted(vg.Devices), ThinPools: pools[vg.Name]})
		}
		slices.SortFunc(n.VolumeGroups, func(a, b VolumeGroup) int { return strings.Compare(a.Name, b.Name) })
		s.Nodes = append(s.Nodes, n)
	}
	scs, vscs := classNames(p)
	var nodes []string
	for _, n := range s.Nodes {
		nodes = append(nodes, n.Name)
	}
	return s, observeShared(ctx, c, &s, nodes, scs, vscs)
}

// v2Node is one node's volume groups as its LVMNode status shows them, limited to the names in want and
// with each device named as want names it (v1 names a device as LVM does; v2 reports the kernel name, the
// selector's path and the stable links).
func v2Node(n *lvmv2.LVMNode, want NodeStorage) NodeStorage {
	out := NodeStorage{Name: want.Name, VolumeGroups: []VolumeGroup{}}
	for _, w := range want.VolumeGroups {
		i := slices.IndexFunc(n.Status.VolumeGroups, func(v lvmv2.VolumeGroupStatus) bool { return v.Name == w.Name })
		if i < 0 {
			continue
		}
		st := n.Status.VolumeGroups[i]
		vg := VolumeGroup{Name: st.Name}
		for _, d := range st.Devices.Included {
			name := d.KName
			for _, alias := range append([]string{d.KName, d.Path}, d.Links...) {
				if alias != "" && slices.Contains(w.Devices, alias) {
					name = alias
					break
				}
			}
			vg.Devices = append(vg.Devices, name)
		}
		for _, lv := range st.Volumes {
			if slices.Contains(w.ThinPools, lv.Name) {
				vg.ThinPools = append(vg.ThinPools, lv.Name)
			}
		}
		vg.Devices, vg.ThinPools = sorted(vg.Devices), sorted(vg.ThinPools)
		out.VolumeGroups = append(out.VolumeGroups, vg)
	}
	return out
}

func sorted(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

// diff lists every difference between before and after as sentences, in a stable order.
func diff(before, after Snapshot) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	for _, b := range before.Nodes {
		i := slices.IndexFunc(after.Nodes, func(a NodeStorage) bool { return a.Name == b.Name })
		if i < 0 {
			add("node %s: not found after the migration", b.Name)
			continue
		}
		a := after.Nodes[i]
		for _, bvg := range b.VolumeGroups {
			j := slices.IndexFunc(a.VolumeGroups, func(v VolumeGroup) bool { return v.Name == bvg.Name })
			if j < 0 {
				add("node %s: volume group %s is missing", b.Name, bvg.Name)
				continue
			}
			avg := a.VolumeGroups[j]
			if !slices.Equal(bvg.Devices, avg.Devices) {
				add("node %s: volume group %s has devices %v, before %v", b.Name, bvg.Name, avg.Devices, bvg.Devices)
			}
			if !slices.Equal(bvg.ThinPools, avg.ThinPools) {
				add("node %s: volume group %s has thin pools %v, before %v", b.Name, bvg.Name, avg.ThinPools, bvg.ThinPools)
			}
		}
		// A device class that offered capacity must still offer it. Its value is not compared: a thin class's
		// capacity follows the pool's real data use, which moves with every write to its volumes; the
		// volume groups, devices, pools and volumes above and below are what must not move.
		for _, dc := range slices.Sorted(maps.Keys(b.Capacity)) {
			if _, ok := a.Capacity[dc]; !ok {
				add("node %s: device class %s reports no capacity, before %q", b.Name, dc, b.Capacity[dc])
			}
		}
	}
	diffList(add, "LogicalVolume", before.LogicalVolumes, after.LogicalVolumes, func(v LogicalVolume) string { return v.Name })
	diffList(add, "PersistentVolume", before.PersistentVolumes, after.PersistentVolumes, func(v PersistentVolume) string { return v.Name })
	diffList(add, "StorageClass", before.StorageClasses, after.StorageClasses, func(v Class) string { return v.Name })
	diffList(add, "VolumeSnapshotClass", before.SnapshotClasses, after.SnapshotClasses, func(v Class) string { return v.Name })
	return out
}

// diffList reports items missing, added or changed (compared as printed, so every field counts).
func diffList[T any](add func(string, ...any), kind string, before, after []T, key func(T) string) {
	index := map[string]T{}
	for _, a := range after {
		index[key(a)] = a
	}
	seen := map[string]bool{}
	for _, b := range before {
		k := key(b)
		seen[k] = true
		a, ok := index[k]
		switch {
		case !ok:
			add("%s %s is missing", kind, k)
		case fmt.Sprintf("%+v", a) != fmt.Sprintf("%+v", b):
			add("%s %s changed: %+v, before %+v", kind, k, a, b)
		}
	}
	for _, a := range after {
		if !seen[key(a)] {
			add("%s %s is new (created during the migration)", kind, key(a))
		}
	}
}
