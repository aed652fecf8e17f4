package plan

import (
	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	storagev1 "k8s.io/api/storage/v1"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

// Input is what a plan is built from.
type Input struct {
	// Cluster is the LVMCluster to replace.
	Cluster *lvmv1.LVMCluster
	// Existing are the cluster's classes; nil when they are not known (a plan from a file alone), so the
	// plan cannot check names or which class is the default now.
	Existing *Existing
}

// Existing are the classes a cluster already has.
type Existing struct {
	StorageClasses  []storagev1.StorageClass
	SnapshotClasses []snapshotv1.VolumeSnapshotClass
}

// Plan is what an LVMCluster becomes.
type Plan struct {
	// Namespace and Name of the LVMCluster; the sets live in the same namespace.
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// NodeSets to create, sorted by name, with apiVersion and kind set.
	NodeSets []lvmv2.LVMNodeSet `json:"nodeSets"`
	// Mappings say what each v1 device class becomes, sorted by device class.
	Mappings []Mapping `json:"mappings"`
	// Findings, in LVMCluster order.
	Findings []Finding `json:"findings"`
	// ClassesKnown is true when the cluster's existing classes were part of the input.
	ClassesKnown bool `json:"classesKnown"`
}

// Mapping is what one v1 device class becomes.
type Mapping struct {
	DeviceClass string                    `json:"deviceClass"`
	NodeSet     string                    `json:"nodeSet"`
	VolumeGroup string                    `json:"volumeGroup"`
	Strategy    lvmv2.DeviceClassStrategy `json:"strategy"`
	// ThinPool is the pool of a Thin class.
	ThinPool string `json:"thinPool,omitempty"`
	// FSType is empty on a shared volume group (raw block volumes).
	FSType  string `json:"fstype,omitempty"`
	Shared  bool   `json:"shared,omitempty"`
	Default bool   `json:"default,omitempty"`
	// StorageClass and SnapshotClass (thin classes only) names, unchanged from v1.
	StorageClass  string `json:"storageClass"`
	SnapshotClass string `json:"snapshotClass,omitempty"`

	// index of the device class in the LVMCluster, for ordering findings.
	index int
}

// Lossy reports whether any finding changes behaviour.
func (p *Plan) Lossy() bool {
	lossy, _ := p.Counts()
	return lossy > 0
}

// Counts returns how many findings are Lossy and how many are Notes.
func (p *Plan) Counts() (lossy, notes int) {
	for _, f := range p.Findings {
		if f.Severity == Lossy {
			lossy++
		} else {
			notes++
		}
	}
	return lossy, notes
}

// Build plans the migration of in.Cluster. It refuses a malformed LVMCluster with an *InvalidError that
// names every problem and its fix, and one that cannot be expressed in v2alpha1 at all.
func Build(in Input) (*Plan, error) {
	c := in.Cluster
	if err := Validate(c); err != nil {
		return nil, err
	}
	var fs findings
	dcs := c.Spec.Storage.DeviceClasses
	convs := make([]converted, 0, len(dcs))
	for i := range dcs {
		convs = append(convs, convert(i, &dcs[i], len(dcs) == 1, &fs))
	}
	p := &Plan{Namespace: c.Namespace, Name: c.Name, ClassesKnown: in.Existing != nil}
	p.NodeSets, p.Mappings = group(c, convs, &fs)
	if in.Existing != nil {
		checkExisting(p, in.Existing, &fs)
	}
	checkGenerated(p, c, &fs)
	p.Findings = fs.sorted()
	return p, nil
}
