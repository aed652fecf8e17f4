package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator"
	"github.com/lvms-dev/lvms/operator/optest"
)

// TestMigrate_HandOverExitCodes runs preflight, apply, verify and rollback as a user would, against a real
// API server with the operator in process. The node agents are test doubles: the v1 one writes
// LVMVolumeGroupNodeStatus, the v2 one writes LVMNode status as an agent that adopted the volume groups.
func TestMigrate_HandOverExitCodes(t *testing.T) {
	testenv.Require(t)
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	ns := env.Namespace(t)
	optest.Start(t, env.Config, operator.Options{Namespace: ns})
	optest.StartFakeV1Agent(t, env.Config, ns, optest.V1Ready)
	optest.StartFakeAgent(t, env.Config, ns, func(n *lvmv2.LVMNode) *lvmv2.LVMNodeStatus {
		st := optest.ReportReady(n)
		for i := range st.VolumeGroups {
			st.VolumeGroups[i].Devices.Included = []lvmv2.Device{{KName: "/dev/" + st.VolumeGroups[i].Name + "-disk"}}
		}
		return st
	})
	optest.CleanUpNamespace(t, env.Client, ns)
	label := "test.lvms.io/" + ns
	node := optest.Node(t, env.Client, ns+"-a", map[string]string{label: "storage"})
	dc := ns + "-vg1"
	cl := &lvmv1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: "lvms", Namespace: ns}, Spec: lvmv1.LVMClusterSpec{Storage: lvmv1.Storage{
		DeviceClasses: []lvmv1.DeviceClass{{Name: dc, Default: true,
			DeviceSelector: &lvmv1.DeviceSelector{Paths: []lvmv1.DevicePath{"/dev/sdb"}},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: label, Operator: corev1.NodeSelectorOpIn, Values: []string{"storage"}}}}}}}}}}}
	if err := env.Client.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	optest.Eventually(t, "the LVMCluster Ready", func() (bool, string) {
		var cur lvmv1.LVMCluster
		optest.Get(t, env.Client, metav1ObjectKey(ns, "lvms"), &cur)
		return cur.Status.State == lvmv1.LVMStatusReady, optest.Describe(cur.Status)
	})
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + ns}, Spec: corev1.PersistentVolumeSpec{
		StorageClassName: "lvms-" + dc, Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
		PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "topolvm.io", VolumeHandle: "pv-" + ns}},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "topology.topolvm.io/node", Operator: corev1.NodeSelectorOpIn, Values: []string{node.Name}}}}}}}}}
	if err := env.Client.Create(ctx, pv); err != nil {
		t.Fatal(err)
	}
	kubeconfig := env.Kubeconfig(t)
	steps := []struct {
		name     string
		args     []string
		wantCode int
		want     []string
	}{
		{"verify before any apply", []string{"verify"}, 1, []string{"no migration record for LVMCluster " + ns + "/lvms"}},
		{"preflight of a lossy plan", []string{"preflight"}, 2, []string{"[Fail] plan: the plan is lossy", "fix: read them in lvms migrate plan", "preflight failed: 1 check(s)"}},
		{"apply of a lossy plan", []string{"apply"}, 3, []string{"the plan is lossy", "--accept-lossy"}},
		{"preflight accepted", []string{"preflight", "--accept-lossy"}, 0, []string{"[Pass] permissions", "[Pass] agent-version", "PersistentVolume pv-" + ns + " (StorageClass lvms-" + dc + ") on node " + node.Name}},
		{"rollback before apply", []string{"rollback"}, 0, []string{"nothing to roll back"}},
		{"apply", []string{"apply", "--accept-lossy", "--timeout", "60s"}, 0, []string{"[mark 1/1]", "[hand-over 1/1] node " + node.Name + " is managed by the LVMNodeSets", "[done 1/1]"}},
		{"verify after apply", []string{"verify", "lvms"}, 0, []string{"at step ClusterRemoved", "No difference."}},
		{"apply again", []string{"apply", "lvms"}, 0, []string{"was removed; the LVMNodeSets lvms manage its storage"}},
		{"rollback after the last step", []string{"rollback", "lvms"}, 1, []string{"the migration is past its last step", "nothing to hand the nodes back to"}},
	}
	for _, st := range steps {
		out, errOut, code := runSplit(t, "", append(append([]string{"migrate"}, st.args...), "--kubeconfig", kubeconfig, "-n", ns)...)
		if code != st.wantCode {
			t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", st.name, code, st.wantCode, out, errOut)
		}
		for _, w := range st.want {
			if !strings.Contains(out+errOut, w) {
				t.Errorf("%s: output lacks %q:\n%s%s", st.name, w, out, errOut)
			}
		}
	}
	optest.DeletePV(t, env.Client, pv)
	out, errOut, code := runSplit(t, "", "migrate", "verify", "lvms", "--kubeconfig", kubeconfig, "-n", ns)
	if code != 2 || !strings.Contains(out, "PersistentVolume pv-"+ns+" is missing") {
		t.Errorf("verify after a PV went: exit %d, want 2 naming the PV:\n%s%s", code, out, errOut)
	}
}

func metav1ObjectKey(ns, name string) client.ObjectKey {
	return client.ObjectKey{Namespace: ns, Name: name}
}
