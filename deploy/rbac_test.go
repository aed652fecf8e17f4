package deploy

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/optest"
)

// TestOperatorRBAC_IsEnough installs the plain Kubernetes overlay's RBAC for real and runs the operator as
// its ServiceAccount (impersonated): a set must reach Ready and get its node agent DaemonSet, CSIDriver,
// agent RBAC and StorageClass, and its deletion must clean everything up — with no permission missing.
func TestOperatorRBAC_IsEnough(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	const ns = "lvms-system"
	for _, o := range render(t, "overlays/kubernetes") {
		if o.GetKind() == "Deployment" {
			continue // the test runs the operator itself
		}
		if err := env.Client.Create(ctx, o.DeepCopy()); client.IgnoreAlreadyExists(err) != nil {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":lvms-operator"}
	optest.Start(t, cfg, operator.Options{Namespace: ns})
	optest.StartFakeAgent(t, env.Config, ns, optest.ReportReady)
	optest.CleanUpNamespace(t, env.Client, ns)

	optest.Node(t, env.Client, "rbac-node", map[string]string{"rbac.lvms.io/storage": "yes"})
	set := &lvmv2.LVMNodeSet{
		ObjectMeta: metav1.ObjectMeta{Name: "rbac", Namespace: ns},
		Spec: lvmv2.LVMNodeSetSpec{
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "rbac.lvms.io/storage", Operator: corev1.NodeSelectorOpExists}}}}},
			Template: lvmv2.LVMNodeSpec{
				VolumeGroups: []lvmv2.VolumeGroup{{Name: "vg1", DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{
					MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyPath, Operator: lvmv2.OpIn, Values: []string{"/dev/sdb"}}}}}}}},
				DeviceClasses: []lvmv2.DeviceClass{{Name: "rbac", Strategy: lvmv2.StrategyThick, VolumeGroup: "vg1"}},
			},
		},
	}
	if err := env.Client.Create(ctx, set); err != nil {
		t.Fatal(err)
	}
	optest.Eventually(t, "the set Ready with its driver objects, as the operator's ServiceAccount", func() (bool, string) {
		var s lvmv2.LVMNodeSet
		var ds appsv1.DaemonSet
		var drv storagev1.CSIDriver
		var sc storagev1.StorageClass
		optest.Get(t, env.Client, client.ObjectKeyFromObject(set), &s)
		have := map[string]bool{
			"daemonset":    optest.Get(t, env.Client, client.ObjectKey{Namespace: ns, Name: names.NodeAgent}, &ds),
			"csidriver":    optest.Get(t, env.Client, client.ObjectKey{Name: topolvmv1.GroupName}, &drv),
			"storageclass": optest.Get(t, env.Client, client.ObjectKey{Name: "lvms-rbac"}, &sc),
		}
		ok := s.Status.State == lvmv2.StateReady && have["daemonset"] && have["csidriver"] && have["storageclass"]
		return ok, fmt.Sprintf("%s %q %v", s.Status.State, s.Status.Message, have)
	})
}
