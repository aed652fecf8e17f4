package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/loopdev"
	"github.com/lvms-dev/lvms/operator"
	"github.com/lvms-dev/lvms/operator/optest"
	"github.com/lvms-dev/lvms/sandbox"
)

// cluster is one test's namespace with its operator and simulated nodes.
type cluster struct {
	t      *testing.T
	ns     string
	c      client.Client
	label  string
	prefix string // unique per test: volume group and devices file names
	nodes  map[string]*node
}

// node is a simulated node: its Node object, disks and in-process agent.
type node struct {
	name  string
	sim   *sandbox.SimNode
	disks map[string]string // disk name -> loop device
	stop  context.CancelFunc
}

func newCluster(t *testing.T) *cluster {
	testenv.Require(t)
	loopdev.RequireRoot(t)
	ns := env.Namespace(t)
	cl := &cluster{t: t, ns: ns, c: env.Client, label: "it.lvms.io/" + ns, prefix: loopdev.Prefix(t), nodes: map[string]*node{}}
	optest.Start(t, env.Config, operator.Options{Namespace: ns})
	optest.CleanUpNamespace(t, env.Client, ns)
	return cl
}

// vg is a volume group name unique to the test.
func (cl *cluster) vg(name string) string { return cl.prefix + name }

// addNode registers a Node with role, attaches its disks (loop devices linked as
// /dev/disk/by-id/lvms-local-<disk> on that node only) and starts its node agent.
func (cl *cluster) addNode(name, role string, disks ...sandbox.DiskSpec) *node {
	cl.t.Helper()
	return cl.addNodeWith(name, role, false, disks...)
}

// addMetadataOnlyNode is addNode with the node's lvm2 never activating a volume (as lvms local's nodes):
// there a thick device class provisions in the metadata and is Ready on this kernel without device-mapper,
// which a test of a Ready LVMCluster needs (a v1 volume group is Ready only where its class can provision).
func (cl *cluster) addMetadataOnlyNode(name, role string, disks ...sandbox.DiskSpec) *node {
	cl.t.Helper()
	return cl.addNodeWith(name, role, true, disks...)
}

func (cl *cluster) addNodeWith(name, role string, metadataOnly bool, disks ...sandbox.DiskSpec) *node {
	t := cl.t
	t.Helper()
	full := cl.ns + "-" + name
	optest.Node(t, cl.c, full, map[string]string{cl.label: role})
	dir := t.TempDir()
	sim, err := sandbox.NewSimNode(dir, full, cl.prefix+"-"+name+".devices")
	if err != nil {
		t.Fatal(err)
	}
	if metadataOnly {
		if err := sim.WithoutActivation(); err != nil {
			t.Fatal(err)
		}
	}
	n := &node{name: full, sim: sim, disks: map[string]string{}}
	diskDir := loopdev.Dir(t)
	for _, d := range disks {
		dev := loopdev.Attach(t, diskDir, d.Size, false)
		if d.Prep == sandbox.PrepExt4 {
			loopdev.Run(t, "mkfs.ext4", "-q", "-F", dev)
		}
		if err := sim.Link(d.Name, dev); err != nil {
			t.Fatal(err)
		}
		n.disks[d.Name] = dev
	}
	// Registered after the loop devices: runs before they are detached.
	t.Cleanup(func() {
		if err := sim.CleanupLVM(context.Background()); err != nil {
			t.Errorf("clean up LVM of %s: %v", full, err)
		}
	})
	n.stop = cl.startAgent(sim)
	cl.nodes[name] = n
	return n
}

func (cl *cluster) startAgent(sim *sandbox.SimNode) context.CancelFunc {
	t := cl.t
	mgr, err := optest.Manager(t, env.Config, cl.ns)
	if err != nil {
		t.Fatal(err)
	}
	a, err := sim.NewAgent(mgr.GetClient(), mgr.GetAPIReader(), cl.ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	optest.Run(t, ctx, cancel, mgr)
	return cancel
}

func (cl *cluster) nodeName(name string) string { return cl.ns + "-" + name }

func (cl *cluster) selector(roles ...string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: cl.label, Operator: corev1.NodeSelectorOpIn, Values: roles}},
	}}}
}

// vgSet is an LVMNodeSet with one volume group of the named disks and no device class. This kernel has no
// device-mapper, so no device class can provision volumes here and the node agent reports every device
// class Degraded (see TestIntegration_DeviceClassesReportTheMissingDeviceMapper); a set of volume groups
// only is what can be Ready on this host.
func (cl *cluster) vgSet(name, role, vg string, disks ...string) *lvmv2.LVMNodeSet {
	s := cl.thickSet(name, role, vg, disks...)
	s.Spec.Template.DeviceClasses = nil
	return s
}

// thickSet is an LVMNodeSet with one thick device class on a volume group of the named disks.
func (cl *cluster) thickSet(name, role, vg string, disks ...string) *lvmv2.LVMNodeSet {
	var paths []string
	for _, d := range disks {
		paths = append(paths, sandbox.LinkName(d))
	}
	return &lvmv2.LVMNodeSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cl.ns},
		Spec: lvmv2.LVMNodeSetSpec{
			NodeSelector: cl.selector(role),
			Template: lvmv2.LVMNodeSpec{
				VolumeGroups: []lvmv2.VolumeGroup{{Name: cl.vg(vg), DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{
					MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyPath, Operator: lvmv2.OpIn, Values: paths}}}}}}},
				DeviceClasses: []lvmv2.DeviceClass{{Name: cl.ns + "-" + name, Strategy: lvmv2.StrategyThick, VolumeGroup: cl.vg(vg)}},
			},
		},
	}
}

func (cl *cluster) create(obj client.Object) {
	cl.t.Helper()
	if err := cl.c.Create(context.Background(), obj); err != nil {
		cl.t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func (cl *cluster) set(name string) *lvmv2.LVMNodeSet {
	var s lvmv2.LVMNodeSet
	if !optest.Get(cl.t, cl.c, client.ObjectKey{Namespace: cl.ns, Name: name}, &s) {
		return nil
	}
	return &s
}

func (cl *cluster) lvmNode(name string) *lvmv2.LVMNode {
	var n lvmv2.LVMNode
	if !optest.Get(cl.t, cl.c, client.ObjectKey{Namespace: cl.ns, Name: cl.nodeName(name)}, &n) {
		return nil
	}
	return &n
}

func (cl *cluster) lvmCluster(name string) *lvmv1.LVMCluster {
	var c lvmv1.LVMCluster
	if !optest.Get(cl.t, cl.c, client.ObjectKey{Namespace: cl.ns, Name: name}, &c) {
		return nil
	}
	return &c
}

// waitSet waits until the set has state, with want in its message, at its current generation.
func (cl *cluster) waitSet(name string, state lvmv2.State, want string) *lvmv2.LVMNodeSet {
	cl.t.Helper()
	var s *lvmv2.LVMNodeSet
	optest.Eventually(cl.t, fmt.Sprintf("LVMNodeSet %s %s with %q", name, state, want), func() (bool, string) {
		s = cl.set(name)
		if s == nil {
			return false, "missing"
		}
		return s.Status.State == state && strings.Contains(s.Status.Message, want) && s.Status.ObservedGeneration == s.Generation, optest.Describe(s.Status)
	})
	return s
}

func (cl *cluster) waitCluster(name string, state lvmv1.LVMStateType, want string) *lvmv1.LVMCluster {
	cl.t.Helper()
	var c *lvmv1.LVMCluster
	optest.Eventually(cl.t, fmt.Sprintf("LVMCluster %s %s with %q", name, state, want), func() (bool, string) {
		c = cl.lvmCluster(name)
		if c == nil {
			return false, "missing"
		}
		return c.Status.State == state && strings.Contains(c.Status.Message, want) && c.Status.ObservedGeneration == c.Generation, optest.Describe(c.Status)
	})
	return c
}

// volumeGroups lists the volume groups lvm2 sees on a node (in its devices file's scope).
func (cl *cluster) volumeGroups(n *node) []string {
	cl.t.Helper()
	rep, err := n.sim.Runner.FullReport(context.Background())
	if err != nil {
		cl.t.Fatalf("lvm fullreport on %s: %v", n.name, err)
	}
	var out []string
	for _, vg := range rep.VGs {
		out = append(out, vg.Name)
	}
	return out
}
