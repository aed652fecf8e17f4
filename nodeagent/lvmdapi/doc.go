// Package lvmdapi serves TopoLVM's lvmd gRPC API (package proto: LVService and VGService, plus gRPC
// health) on top of the node agent's lvm package and the lvmd.yaml device classes, and dials it. The same
// Server runs inside the node agent (reached through an in-memory connection) or as `lvms lvmd` on a unix
// socket, so the LogicalVolume reconciler speaks one client API to either, and to an upstream TopoLVM lvmd.
//
// Capacity: a thick device class has the VG's free bytes, less spare-gb for what is reported
// (GetFreeBytes, Watch), as in TopoLVM. A thin device class has the smaller of what TopoLVM offers (pool size
// × overprovision-ratio minus the virtual size of the pool's thin volumes) and what the pool's real data
// leaves below the class's data-usage-threshold, and nothing once its metadata reaches
// metadata-usage-threshold (thinAllowance, capacity.go); a new thin volume, snapshot or growth in a pool at
// a threshold is refused. Domain errors are mapped to gRPC codes here, at the API boundary: unknown device
// class NotFound, no space or a pool past its threshold ResourceExhausted, thick snapshots Unimplemented, a
// smaller snapshot than its source OutOfRange.
package lvmdapi
