// Package lockspace runs the lvm2 commands of shared volume groups: creating one on a LUN (after checking
// that the LUN is blank), joining and leaving its sanlock lockspace, and making the LUN visible to the
// agent's devices file on every node.
//
// Every command carries `--config` with global/use_lvmlockd=1 and the node's local/host_id, so lvm2 talks to
// lvmlockd without the host's lvm.conf being edited: hosts whose local volume groups know nothing of
// lvmlockd keep working as before.
package lockspace
