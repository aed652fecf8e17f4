// Package topolvmstate builds what a TopoLVM install leaves behind when MicroShift's upgrade removes it:
// lvmd.yaml as MicroShift writes it, LVs named and created as TopoLVM makes them, and TopoLVM's objects in
// the API (LogicalVolumes with its finalizer, label and status; PVs and bound PVCs). The take-over tests of
// every tier start from it.
package topolvmstate

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

// LVMDConfig is lvmd.yaml as MicroShift writes it (its documented shape, comments included): a thick
// default class "default" with spare-gb 0 and a thin class "thin" on pool "thin", both on vg.
func LVMDConfig(vg string) string {
	return `# Unix domain socket endpoint of gRPC
socket-name: /run/lvmd/lvmd.socket
device-classes:
  # The name of a device-class
  - name: default
    volume-group: ` + vg + `
    spare-gb: 0
    default: true
  - name: thin
    volume-group: ` + vg + `
    type: thin
    thin-pool:
      name: thin
      overprovision-ratio: 10
`
}

// LVCreateArgs are lvcreate's arguments as TopoLVM's lvmd runs it for a volume of LVMDConfig's class
// ("thin" or the thick default) named name (the LogicalVolume's UID).
func LVCreateArgs(vg, class, name string, size int64) []string {
	bytes := strconv.FormatInt(size, 10) + "b"
	if class == "thin" {
		return []string{"-y", "-T", vg + "/thin", "-V", bytes, "-n", name}
	}
	return []string{"-n", name, "-L", bytes, "-W", "y", "-y", vg}
}

// Volume is one of TopoLVM's volumes: a claim of class Class (a device class of LVMDConfig) with file
// system FS ("" for a raw block volume).
type Volume struct {
	Claim, Class, FS string
	Size             int64
	// UID is the LogicalVolume's UID: the volume ID and the LV's name. Set by Create.
	UID string
	// Name is the LogicalVolume's and the PV's name, pvc-<the PVC's UID>. Set by Create.
	Name string
}

// Create makes the volume's objects on node as TopoLVM leaves them — the PVC in namespace ns bound to its
// PV, and the LogicalVolume, both named as the CSI provisioner names them, the LogicalVolume with TopoLVM's
// finalizer, created-by label and status — and sets UID and Name.
func (v *Volume) Create(ctx context.Context, c client.Client, names driver.Names, ns, storageClass, node string) error {
	size := resource.NewQuantity(v.Size, resource.BinarySI)
	mode := corev1.PersistentVolumeFilesystem
	if v.FS == "" {
		mode = corev1.PersistentVolumeBlock
	}
	class := storageClass
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v.Claim,
		Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes",
			"volume.kubernetes.io/storage-provisioner": names.Driver(), "volume.kubernetes.io/selected-node": node}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &class, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeMode: &mode,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: *size}}}}
	if err := c.Create(ctx, pvc); err != nil {
		return fmt.Errorf("claim %s: %w", v.Claim, err)
	}
	v.Name = "pvc-" + string(pvc.UID)
	lv := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: v.Name, Finalizers: []string{names.LogicalVolumeFinalizer()},
		Labels: map[string]string{driver.CreatedByLabel: driver.CreatedByValue}},
		Spec: topolvmv1.LogicalVolumeSpec{Name: v.Name, NodeName: node, DeviceClass: v.Class, Size: *size}}
	if err := c.Create(ctx, lv); err != nil {
		return fmt.Errorf("LogicalVolume of %s: %w", v.Claim, err)
	}
	v.UID = string(lv.UID)
	lv.Status = topolvmv1.LogicalVolumeStatus{VolumeID: v.UID, CurrentSize: size}
	if err := c.Status().Update(ctx, lv); err != nil {
		return fmt.Errorf("LogicalVolume status of %s: %w", v.Claim, err)
	}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: v.Name, Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": names.Driver()}},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: *size}, AccessModes: pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete, StorageClassName: storageClass, VolumeMode: &mode,
			ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: v.Claim, UID: pvc.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: names.Driver(), VolumeHandle: v.UID, FSType: v.FS}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: names.TopologyKey(), Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}}}}
	if err := c.Create(ctx, pv); err != nil {
		return fmt.Errorf("PV of %s: %w", v.Claim, err)
	}
	// Patches, not updates: in a real cluster the controllers write to the claim meanwhile (its protection).
	base := pvc.DeepCopy()
	pvc.Spec.VolumeName = v.Name
	if err := c.Patch(ctx, pvc, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("bind %s: %w", v.Claim, err)
	}
	base = pvc.DeepCopy()
	pvc.Status.Phase, pvc.Status.Capacity, pvc.Status.AccessModes = corev1.ClaimBound, pv.Spec.Capacity, pv.Spec.AccessModes
	if err := c.Status().Patch(ctx, pvc, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("bind %s: %w", v.Claim, err)
	}
	return nil
}
