// Package metrics turns lvmd's capacity stream (VGService.Watch) into what the rest of the cluster reads:
// the topolvm_volumegroup_* and topolvm_thinpool_* gauges (label device_class, constant label node) and
// the capacity.topolvm.io/<device-class> annotations on this node's Node (capacity.topolvm.io/00default
// for the default device class), which the controller uses to place volumes and the provisioner to
// publish CSIStorageCapacity. Values are decimal bytes: thick VG free − spare, thin what lvmd offers (the
// ratio's allowance capped by the pool's real room below its usage threshold). Beside them: the pools'
// usage thresholds (lvms_thinpool_*_usage_threshold_percent), and, when a pool's data or metadata use
// rises to 10 points below its threshold or to it, one Warning event on the Node (ThinPoolNearlyFull,
// ThinPoolFull; poolalarm.go).
package metrics
