// Package logicalvolume is the node side of TopoLVM's LogicalVolume lifecycle: for every LogicalVolume
// whose spec.nodeName is this node it creates the LV (thick, thin, or a thin snapshot or clone of the
// source LogicalVolume's LV) through the lvmd API, grows it when spec.size grows, and removes it when the
// object is deleted, holding the topolvm.io/logicalvolume finalizer until then. The LV is named after the
// object's uid, which is also status.volumeID, the CSI volume ID. Status is TopoLVM's: volumeID,
// currentSize, and a gRPC code and message when the node cannot do what was asked — the controller reads
// that code as its answer and deletes the object.
//
// After a crash between lvcreate and the status write, the LV named after the uid already exists: the
// reconciler adopts it instead of creating a second one.
package logicalvolume
