package analyze_test

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/diagnostics/analyze"
	"github.com/lvms-dev/lvms/diagnostics/bundletest"
)

// The shared volume group the shared cases add to the healthy state, on one LUN every node sees.
const (
	sharedVG  = "san"
	sharedLUN = "/dev/disk/by-id/wwn-0x600a0b80001"
	// The node agent's sentences (nodeagent/shared and its lockd).
	fencingOff = "no watchdog: a node that loses its leases is not reset (no fencing); use a host with a watchdog device and wdmd for production"
	fencingOn  = "watchdog in use: a node that cannot renew its leases is reset by its watchdog before other nodes may take them over (fencing)"
)

// share gives every node of the healthy state the shared volume group: in the lockspace, created by
// worker-a, lock managers run by the agent with a watchdog, host IDs 1 and 2.
func share(s *bundletest.State) {
	g := lvmv2.VolumeGroup{Name: sharedVG, AccessPolicy: lvmv2.AccessPolicyShared,
		DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{MatchExpressions: []lvmv2.DeviceSelectorRequirement{
			{Key: lvmv2.KeyPath, Operator: lvmv2.OpIn, Values: []string{sharedLUN}}}}}}}
	set := bundletest.Find[*lvmv2.LVMNodeSet](s, bundletest.Set)
	set.Spec.Template.VolumeGroups = append(set.Spec.Template.VolumeGroups, g)
	for i, name := range bundletest.Nodes {
		n := node(s, name)
		n.Spec.VolumeGroups = append(n.Spec.VolumeGroups, g)
		n.Status.VolumeGroups = append(n.Status.VolumeGroups, lvmv2.VolumeGroupStatus{Name: sharedVG, State: lvmv2.StateHealthy,
			Size: resourceGi(500), Free: resourceGi(500), Lockspace: lvmv2.LockspaceJoined, InitializedBy: bundletest.NodeA})
		n.Status.SharedLocking = &lvmv2.SharedLockingStatus{Mode: "Agent", HostID: int32(i + 1), Watchdog: true, Fencing: fencingOn}
	}
}

// sharedVGOf is a node's shared volume group status.
func sharedVGOf(s *bundletest.State, name string) *lvmv2.VolumeGroupStatus {
	n := node(s, name)
	return &n.Status.VolumeGroups[slices.IndexFunc(n.Status.VolumeGroups, func(g lvmv2.VolumeGroupStatus) bool { return g.Name == sharedVG })]
}

// outOfLockspace takes worker-b's shared volume group out of its lockspace in state st, for the reason msg.
func outOfLockspace(s *bundletest.State, st lvmv2.State, msg string) {
	g := sharedVGOf(s, bundletest.NodeB)
	g.State, g.Message, g.Lockspace, g.InitializedBy, g.Size, g.Free = st, msg, lvmv2.LockspaceNotJoined, "", nil, nil
	n := node(s, bundletest.NodeB)
	n.Status.State, n.Status.Message = st, "volume group "+sharedVG+": "+msg
}

const lunMissing = "LUN " + sharedLUN + " of shared volume group " + sharedVG + " is not visible on this node: check its SAN zoning and multipath, then LVMS goes on"

var sharedCases = []brokenCase{
	{name: "shared-lock-managers-not-running", break_: func(s *bundletest.State) {
		share(s)
		sl := node(s, bundletest.NodeB).Status.SharedLocking
		sl.Mode, sl.Watchdog, sl.Fencing, sl.Message = "NotRunning", false, fencingOff, "sanlock exited with status 1: wdmd connect failed"
		outOfLockspace(s, lvmv2.StateProgressing, "waiting for sanlock and lvmlockd (NotRunning): sanlock exited with status 1: wdmd connect failed")
	}, want: []want{{analyze.CheckLockManagers, analyze.Fail, bundletest.NodeB,
		[]string{"do not run on node worker-b (mode NotRunning)", "sanlock exited with status 1", "can neither create nor join"}}}},
	{name: "shared-lockspace-not-joined", break_: func(s *bundletest.State) {
		share(s)
		outOfLockspace(s, lvmv2.StateFailed, sharedLUN+" is not blank (signature xfs): LVMS creates a shared volume group only on a blank LUN; "+
			"if its data is not needed, wipe it by hand from one node (wipefs --all "+sharedLUN+"), then LVMS creates the volume group")
	}, want: []want{{analyze.CheckLockspace, analyze.Fail, bundletest.NodeB,
		[]string{"Node worker-b is not in the lockspace of shared volume group san (Failed)", "no volume of it can be used there", "is not blank"}}}},
	{name: "shared-lockspace-not-joined-yet", break_: func(s *bundletest.State) {
		share(s)
		outOfLockspace(s, lvmv2.StateProgressing, "shared volume group san is being created by node worker-a")
	}, want: []want{{analyze.CheckLockspace, analyze.Warn, bundletest.NodeB,
		[]string{"(Progressing)", "being created by node worker-a", "The agent retries by itself"}}}},
	{name: "shared-lun-missing", break_: func(s *bundletest.State) {
		share(s)
		outOfLockspace(s, lvmv2.StateFailed, lunMissing)
	}, want: []want{{analyze.CheckSharedLUN, analyze.Fail, bundletest.NodeB,
		[]string{"A LUN of shared volume group san is not visible on node worker-b", "the other nodes are not affected", "SAN zoning"}}}},
	{name: "shared-host-id-conflict", break_: func(s *bundletest.State) {
		share(s)
		node(s, bundletest.NodeB).Status.SharedLocking.HostID = 1
	}, want: []want{{analyze.CheckHostIDConflict, analyze.Fail, bundletest.NodeA,
		[]string{"Nodes worker-a and worker-b report the same sanlock host ID, 1", "the Lease lvms/lvms-host-id-1 names the one node that owns it"}}}},
	{name: "shared-no-watchdog", break_: func(s *bundletest.State) {
		share(s)
		for _, n := range bundletest.Nodes {
			sl := node(s, n).Status.SharedLocking
			sl.Watchdog, sl.Fencing, sl.Mode = false, fencingOff, "Host"
		}
	}, want: []want{
		{analyze.CheckNoWatchdog, analyze.Warn, bundletest.NodeA, []string{"sanlock on node worker-a runs without a watchdog", "is not reset", fencingOff}},
		{analyze.CheckNoWatchdog, analyze.Warn, bundletest.NodeB, []string{"sanlock on node worker-b runs without a watchdog"}},
	}},
}

// Nodes that are in a shared volume group's lockspace, with a watchdog and distinct host IDs, give nothing to
// warn about.
func TestRun_SharedHealthy(t *testing.T) {
	s := bundletest.Healthy()
	share(s)
	for _, f := range analyze.Run(s.Bundle(t)) {
		if f.Severity != analyze.Pass {
			t.Errorf("healthy shared volume group: %s %s on %s: %s", f.Severity, f.CheckName, f.Node, f.Message)
		}
	}
}

// One finding per cause: lock managers that do not run are reported, not each shared volume group they
// keep out of its lockspace; a missing LUN is reported as such, not also as a failed volume group; no
// watchdog warning comes while the lock managers do not run (the agent cannot tell yet).
func TestRun_SharedOneFindingPerCause(t *testing.T) {
	for _, tc := range sharedCases {
		t.Run(tc.name, func(t *testing.T) {
			s := bundletest.Healthy()
			tc.break_(s)
			fs := analyze.Run(s.Bundle(t))
			count := map[string]int{}
			for _, f := range fs {
				if f.Severity != analyze.Pass {
					count[f.CheckName]++
				}
			}
			for _, w := range tc.want {
				count[w.check]--
			}
			for check, extra := range count {
				// A node that is not Ready is reported with its cause: that finding is expected besides the cause's own.
				if extra > 0 && check != analyze.CheckNodeNotReady {
					t.Errorf("%d unexpected %s findings:\n%s", extra, check, text(fs))
				}
			}
		})
	}
}

// The fix of every shared finding says what to do, and the LUN and host-ID findings name the object to look at.
func TestRun_SharedFindingsNameWhatToLookAt(t *testing.T) {
	s := bundletest.Healthy()
	share(s)
	outOfLockspace(s, lvmv2.StateFailed, lunMissing)
	node(s, bundletest.NodeB).Status.SharedLocking.HostID = 1
	fs := analyze.Run(s.Bundle(t))
	i := slices.IndexFunc(fs, func(f analyze.Finding) bool { return f.CheckName == analyze.CheckSharedLUN })
	if i < 0 || fs[i].Device != sharedLUN || fs[i].VolumeGroup != sharedVG || !strings.Contains(fs[i].Fix, "multipath -ll") {
		t.Errorf("LUN finding should name the LUN and how to check it: %+v", ptr.To(fs[max(i, 0)]))
	}
	i = slices.IndexFunc(fs, func(f analyze.Finding) bool { return f.CheckName == analyze.CheckHostIDConflict })
	if i < 0 || fs[i].InvolvedObject == nil || fs[i].InvolvedObject.String() != "Lease lvms/lvms-host-id-1" ||
		!strings.Contains(fs[i].Command, "-l lvm.topolvm.io/host-id") {
		t.Errorf("host ID finding should name the Lease and list the host-ID Leases: %+v", ptr.To(fs[max(i, 0)]))
	}
}

// A shared volume group removed from the spec, which the node left on purpose, is not reported as out of
// its lockspace.
func TestRun_SharedLeftOnPurpose(t *testing.T) {
	s := bundletest.Healthy()
	share(s)
	outOfLockspace(s, lvmv2.StateProgressing, "left its lockspace; shared volume group san stays on its LUN")
	n := node(s, bundletest.NodeB)
	n.Spec.VolumeGroups = n.Spec.VolumeGroups[:1]
	for _, f := range analyze.Run(s.Bundle(t)) {
		if f.CheckName == analyze.CheckLockspace && f.Severity != analyze.Pass {
			t.Errorf("a volume group left on purpose is reported: %s", f.Message)
		}
	}
}
