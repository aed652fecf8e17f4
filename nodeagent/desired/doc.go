// Package desired is the node agent's one model of a node's desired storage: volume groups with their
// device selectors and thin pools, and device classes. It is built from either API — a v2alpha1 LVMNode
// (spec), or the v1alpha1 LVMVolumeGroups whose nodeSelector matches the node together with the
// LVMCluster's configurationPolicy — so the rest of the agent never looks at API types.
package desired
