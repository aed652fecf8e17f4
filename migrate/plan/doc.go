// Package plan turns a v1alpha1 LVMCluster into the v2alpha1 LVMNodeSets that replace it, and lists every
// place where the two APIs do not mean exactly the same thing. It is pure: it reads only what the caller
// passes (the LVMCluster and, when known, the cluster's StorageClasses and VolumeSnapshotClasses) and does no
// I/O, so `lvms migrate plan -f`, the console and the later apply step all get the same answer.
//
// The mapping (README.md, "Migrating from LVMCluster (v1alpha1) to LVMNodeSet (v2alpha1)"):
//   - one LVMNodeSet per distinct node selector of the device classes (the tolerations are the LVMCluster's,
//     so every set gets them); a set holds at most 8 volume groups, so a larger group is split;
//   - every device class becomes a volume group and a device class of the same name (LVMS names the volume
//     group after the device class), thin pools keep name and settings, thick stays thick, fstype is kept;
//   - StorageClass and VolumeSnapshotClass names are pinned with namingPolicy Explicit (lvms-<class>), and
//     the default class stays the default;
//   - every set carries names.MigratedFromAnnotation naming the LVMCluster, never the handed-over-nodes
//     annotation: nodes are handed over one by one later.
//
// Findings have a stable Code, the v1 field path and a message for the user. A Lossy finding means v2 will
// behave differently from v1 in a way the user may notice; a plan with one is Lossy. Notes explain exact
// mappings that still deserve a sentence. Output is deterministic: sets, classes and findings are sorted.
package plan
