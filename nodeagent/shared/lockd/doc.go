// Package lockd keeps a node's lock managers for shared volume groups running: sanlock (leases on the shared
// LUN) and lvmlockd (which turns lvm's locks into sanlock leases).
//
// When the host already runs both (their status commands answer), the Supervisor uses them and only watches
// (mode Host). Otherwise it runs them itself behind the runner's prefix (mode Agent): sanlock first, then
// lvmlockd with the node's host ID, each in its own process group, restarted with a backoff when it exits,
// and stopped (SIGTERM, then SIGKILL of the group) when the agent stops. It never starts a second instance:
// it holds an exclusive flock on a lock file while it runs them, uses an instance that already answers, and
// the daemons themselves refuse to start twice (they lock their pid files).
//
// lvm is told about lvmlockd per command (LVMConfig), so the host's lvm.conf is never edited.
//
// Fencing needs a watchdog: sanlock, through wdmd, resets a host that cannot renew its leases before other
// hosts may take them over. The Supervisor uses the watchdog when the host has one (wdmd answers or a
// watchdog device exists; it starts wdmd itself when only the device is there). Without one it runs sanlock
// with -w 0 and says so in Status.Fencing: a node that loses its leases keeps running, which is fine for tests
// and not for production.
//
// Stopping a lock manager that holds lockspaces drops this host's locks; with a watchdog, sanlock then resets
// the host. Stop the shared volume groups' lockspaces (vgchange --lockstop) before stopping the agent.
package lockd
