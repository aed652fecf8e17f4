// Package driver holds TopoLVM's names — CSI driver name, topology key, StorageClass parameters,
// annotations, finalizers — for the topolvm.io group or, with the legacy switch, topolvm.cybozu.com, and
// builds the scheme in which LogicalVolume maps to the selected group. The switch is a value (Names)
// passed to whoever needs it, never an environment read at call time.
package driver
