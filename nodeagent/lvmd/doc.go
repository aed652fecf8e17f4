// Package lvmd holds lvmd.yaml, TopoLVM's lvmd configuration file, as LVMS reads and writes it: the types
// (socket-name, device-classes with name, volume-group, default, spare-gb, type thick|thin,
// thin-pool{name, overprovision-ratio, and LVMS's optional data-usage-threshold and metadata-usage-threshold,
// which TopoLVM's files lack and then default}, lvcreate-options, stripe, stripe-size; lvcreate-option-classes),
// decoding as TopoLVM's lvmd decodes (keys nothing reads are listed with their lines as warnings, a value of
// the wrong type is an error naming its line), validation as TopoLVM validates, a check against
// the node's LVM state (missing volume groups or thin pools), an atomic write (temporary file, fsync,
// rename), and a Watcher that re-reads the file when it changes so that consumers get the new configuration
// in process, without a restart.
//
// The API is Load(path), Write(path, cfg), Parse(data), (*Config).Validate(), (*Config).CheckLVM(report),
// and NewWatcher(path) with Run, Current and Changes.
package lvmd
