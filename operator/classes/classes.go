package classes

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/operator/names"
)

// Owner is the LVMNodeSet or LVMCluster a class is generated for.
type Owner struct {
	Kind      string
	Namespace string
	Name      string
}

// Labels are the ownership labels of a generated class.
func (o Owner) Labels() map[string]string {
	return map[string]string{
		names.ManagedByLabel:      names.ManagedByValue,
		names.OwnerKindLabel:      o.Kind,
		names.OwnerNamespaceLabel: o.Namespace,
		names.OwnerNameLabel:      o.Name,
	}
}

// String is "LVMNodeSet ns/name".
func (o Owner) String() string { return fmt.Sprintf("%s %s/%s", o.Kind, o.Namespace, o.Name) }

// StorageClass is the desired StorageClass of one device class.
type StorageClass struct {
	Name string
	// Provisioner is the TopoLVM driver (Set.Driver), or names.SharedCSIDriverName for a shared volume group.
	Provisioner string
	DeviceClass string
	// FSType is xfs, ext4 or btrfs; empty for shared (block-only) classes.
	FSType            string
	Default           bool
	ReclaimPolicy     corev1.PersistentVolumeReclaimPolicy
	VolumeBindingMode storagev1.VolumeBindingMode
	// Parameters are the user's additional parameters (LVMS's own keys are added on top).
	Parameters map[string]string
	// Labels are the user's additional labels (ownership labels are added on top).
	Labels map[string]string
}

// SnapshotClass is the desired VolumeSnapshotClass of one thin device class.
type SnapshotClass struct {
	Name           string
	DeviceClass    string
	DeletionPolicy string
}

// Set is everything one owner generates.
type Set struct {
	Owner Owner
	// Driver names the TopoLVM group the classes are for (topolvm.io, or topolvm.cybozu.com in legacy
	// mode): the StorageClass device-class parameter and the VolumeSnapshotClass driver.
	Driver          driver.Names
	StorageClasses  []StorageClass
	SnapshotClasses []SnapshotClass
	// Adopt lists owners whose class of the same name this owner takes over in place during a migration: the
	// ownership labels change, the object stays (same UID, so PVs and bound claims never notice). A class
	// whose provisioner or parameters differ is not adopted but reported as taken: LVMS never deletes a
	// StorageClass to adopt it.
	Adopt []Owner
	// Yield lists owners whose class of the same name this owner leaves alone without reporting it as taken:
	// the other side of a migration hand-over (see Adopt).
	Yield []Owner
}

// ownerIn returns the owner among list whose labels labels carries.
func ownerIn(labels map[string]string, list []Owner) (Owner, bool) {
	for _, o := range list {
		if ownedBy(labels, o) {
			return o, true
		}
	}
	return Owner{}, false
}

const (
	defaultFSType  = "xfs"
	description    = "Provides RWO and RWOP Filesystem & Block volumes"
	deletionDelete = "Delete"
)

// ForNodeSet returns the classes of an LVMNodeSet's template for driver d, in template order. Provider
// strategy Unmanaged generates none; naming policy None skips a class.
func ForNodeSet(set *lvmv2.LVMNodeSet, d driver.Names) Set {
	out := Set{Owner: Owner{Kind: names.KindNodeSet, Namespace: set.Namespace, Name: set.Name}, Driver: d}
	if set.Spec.Provider.Strategy == lvmv2.ProviderUnmanaged {
		return out
	}
	for _, dc := range set.Spec.Template.DeviceClasses {
		shared := isSharedVG(set.Spec.Template.VolumeGroups, dc.VolumeGroup)
		var tmpl lvmv2.StorageClassTemplate
		if dc.StorageClass != nil {
			tmpl = *dc.StorageClass
		}
		if name := className(tmpl.NamingPolicy, tmpl.Prefix, tmpl.Name, dc.Name); name != "" {
			sc := StorageClass{
				Name:              name,
				Provisioner:       provisioner(shared, d),
				DeviceClass:       dc.Name,
				FSType:            string(dc.FilesystemType),
				Default:           dc.Default,
				ReclaimPolicy:     corev1.PersistentVolumeReclaimDelete,
				VolumeBindingMode: storagev1.VolumeBindingWaitForFirstConsumer,
				Parameters:        maps.Clone(tmpl.AdditionalParameters),
			}
			if sc.FSType == "" && !shared {
				sc.FSType = defaultFSType
			}
			if tmpl.ReclaimPolicy != nil {
				sc.ReclaimPolicy = *tmpl.ReclaimPolicy
			}
			if tmpl.VolumeBindingMode != nil {
				sc.VolumeBindingMode = storagev1.VolumeBindingMode(*tmpl.VolumeBindingMode)
			}
			out.StorageClasses = append(out.StorageClasses, sc)
		}
		if dc.Strategy != lvmv2.StrategyThin {
			continue
		}
		var snap lvmv2.SnapshotClassTemplate
		if dc.SnapshotClass != nil {
			snap = *dc.SnapshotClass
		}
		if name := className(snap.NamingPolicy, snap.Prefix, snap.Name, dc.Name); name != "" {
			policy := snap.DeletionPolicy
			if policy == "" {
				policy = deletionDelete
			}
			out.SnapshotClasses = append(out.SnapshotClasses, SnapshotClass{Name: name, DeviceClass: dc.Name, DeletionPolicy: policy})
		}
	}
	return out
}

// ForCluster returns the classes of an LVMCluster for driver d, in device-class order, named
// lvms-<device class> as LVMS names them. The default class is the one marked default, or the only one.
// ExternalConfiguration generates none: the host's lvmd.yaml and whoever wrote it own the classes.
func ForCluster(c *lvmv1.LVMCluster, d driver.Names) Set {
	out := Set{Owner: Owner{Kind: names.KindCluster, Namespace: c.Namespace, Name: c.Name}, Driver: d}
	if c.Spec.ConfigurationPolicy == lvmv1.ConfigurationPolicyExternal {
		return out
	}
	dcs := c.Spec.Storage.DeviceClasses
	for _, dc := range dcs {
		name := names.DefaultClassPrefix + "-" + dc.Name
		shared := dc.DeviceAccessPolicy.Normalized() == lvmv1.DeviceAccessPolicyShared
		sc := StorageClass{
			Name:              name,
			Provisioner:       provisioner(shared, d),
			DeviceClass:       dc.Name,
			FSType:            string(dc.FilesystemType),
			Default:           c.Spec.Storage.IsDefault(dc),
			ReclaimPolicy:     corev1.PersistentVolumeReclaimDelete,
			VolumeBindingMode: storagev1.VolumeBindingWaitForFirstConsumer,
		}
		if sc.FSType == "" && !shared {
			sc.FSType = defaultFSType
		}
		if o := dc.StorageClassOptions; o != nil {
			if o.ReclaimPolicy != nil {
				sc.ReclaimPolicy = *o.ReclaimPolicy
			}
			if o.VolumeBindingMode != nil {
				sc.VolumeBindingMode = storagev1.VolumeBindingMode(*o.VolumeBindingMode)
			}
			sc.Parameters = maps.Clone(o.AdditionalParameters)
			sc.Labels = maps.Clone(o.AdditionalLabels)
		}
		out.StorageClasses = append(out.StorageClasses, sc)
		if dc.ThinPoolConfig != nil {
			out.SnapshotClasses = append(out.SnapshotClasses, SnapshotClass{Name: name, DeviceClass: dc.Name, DeletionPolicy: deletionDelete})
		}
	}
	return out
}

// StorageClassNames returns the names of the set's StorageClasses, sorted.
func (s Set) StorageClassNames() []string {
	out := make([]string, 0, len(s.StorageClasses))
	for _, sc := range s.StorageClasses {
		out = append(out, sc.Name)
	}
	slices.Sort(out)
	return out
}

func className(policy lvmv2.NamingPolicy, prefix, explicit, deviceClass string) string {
	switch policy {
	case lvmv2.NamingNone:
		return ""
	case lvmv2.NamingExplicit:
		return explicit
	}
	if prefix == "" {
		prefix = names.DefaultClassPrefix
	}
	return prefix + "-" + deviceClass
}

func isSharedVG(vgs []lvmv2.VolumeGroup, name string) bool {
	for _, vg := range vgs {
		if vg.Name == name {
			return vg.AccessPolicy == lvmv2.AccessPolicyShared
		}
	}
	return false
}

func provisioner(shared bool, d driver.Names) string {
	if shared {
		return names.SharedCSIDriverName
	}
	return d.Driver()
}
