// Package lvm runs host commands for the node agent and speaks lvm2: a Runner value (command prefix such as
// nsenter into the host, environment, the agent's own LVM devices file) that every host command goes
// through, typed errors carrying the exit code and stderr, parsing of `lvm fullreport --reportformat json`,
// the lvm2 commands the agent issues (pvcreate, vgcreate, vgextend, vgreduce, pvremove, thin pool lvcreate,
// lvextend, lvchange, lvremove, vgremove), device-mapper target detection, and a recorded-output executor
// that replays real lvm2 output for fast tests of paths the host kernel cannot run.
//
// There is no package-level state: several Runners (several simulated nodes) work side by side in one
// process.
package lvm
