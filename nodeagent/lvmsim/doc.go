// Package lvmsim is a stateful stand-in for lvm2: an lvm.Executor that keeps volume groups, thin pools and
// LVs in memory and answers the lvm2 commands the CSI path issues (fullreport, lvcreate for thick, thin and
// snapshot volumes, lvresize, lvchange, lvremove) with output in lvm2's own JSON report shape and lvm2's
// error messages and exit codes. Tests on a host without device-mapper use it to drive the lvmd service,
// the LogicalVolume reconciler and the CSI services end to end, and assert on the resulting state rather
// than on the commands issued. The VM lane proves the same paths against real lvm2.
package lvmsim
