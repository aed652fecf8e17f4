package nodeset_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/optest"
)

func TestNodeSet_ThinClassGetsASnapshotClassOnceTheSnapshotAPIExists(t *testing.T) {
	testenv.Require(t)
	f := newFixture(t, optest.ReportReady)
	f.node("a", "storage")
	set := f.set("snap", "storage", "vg1")
	set.Spec.Template.DeviceClasses[0].Strategy = lvmv2.StrategyThin
	set.Spec.Template.DeviceClasses[0].Thin = &lvmv2.ThinConfig{PoolName: "pool", SizePercent: 90, OverprovisionRatio: 10}
	f.create(set)
	name := "lvms-" + f.ns + "-vg1"

	installSnapshotClassCRD(t)
	// A spec change makes the set look again (the operator does not watch CRDs).
	s := f.getSet("snap")
	base := s.DeepCopy()
	s.Annotations = map[string]string{"touched": "yes"}
	if err := f.c.Patch(context.Background(), s, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: operator.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	var vsc snapshotv1.VolumeSnapshotClass
	optest.Eventually(t, "VolumeSnapshotClass "+name, func() (bool, string) {
		return optest.Get(t, c, client.ObjectKey{Name: name}, &vsc), ""
	})
	if vsc.Driver != "topolvm.io" || vsc.DeletionPolicy != snapshotv1.VolumeSnapshotContentDelete || vsc.Parameters["topolvm.io/device-class"] != f.ns+"-vg1" {
		t.Errorf("VolumeSnapshotClass = %+v", vsc)
	}
	if err := f.c.Delete(context.Background(), f.getSet("snap")); err != nil {
		t.Fatal(err)
	}
	optest.Eventually(t, "the VolumeSnapshotClass pruned with its set", func() (bool, string) {
		return !optest.Get(t, c, client.ObjectKey{Name: name}, &vsc), ""
	})
}

// installSnapshotClassCRD installs the VolumeSnapshotClass CRD from the external-snapshotter client module
// (the API stays for the rest of the suite, as on a cluster that gained it).
func installSnapshotClassCRD(t *testing.T) {
	t.Helper()
	testenv.Require(t)
	var crdDir string
	if out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/kubernetes-csi/external-snapshotter/client/v8").Output(); err == nil {
		crdDir = filepath.Join(strings.TrimSpace(string(out)), "config", "crd")
	}
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(crdDir, "snapshot.storage.k8s.io_volumesnapshotclasses.yaml")}, ErrorIfPathMissing: true,
	}); err != nil {
		t.Fatalf("install the VolumeSnapshotClass CRD (from the external-snapshotter client module): %v", err)
	}
}

// TestProvider_DriverNamesFollowLegacyMode: with --legacy every object the operator generates names
// topolvm.cybozu.com (CSIDriver, StorageClass provisioner and parameter, VolumeSnapshotClass, the node
// agent's LogicalVolume RBAC and its --legacy flag); without it, topolvm.io.
func TestProvider_DriverNamesFollowLegacyMode(t *testing.T) {
	testenv.Require(t)
	installSnapshotClassCRD(t)
	for _, tc := range []struct {
		name   string
		legacy bool
		driver string
	}{
		{"topolvm.io", false, "topolvm.io"},
		{"legacy", true, "topolvm.cybozu.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixtureWith(t, optest.ReportReady, operator.Options{Names: driver.New(tc.legacy)})
			f.node("a", "storage")
			set := f.set("names", "storage", "vg1")
			set.Spec.Template.DeviceClasses[0].Strategy = lvmv2.StrategyThin
			set.Spec.Template.DeviceClasses[0].Thin = &lvmv2.ThinConfig{PoolName: "pool", SizePercent: 90, OverprovisionRatio: 10}
			f.create(set)
			// Ready means the provider condition found the CSIDriver of the mode's name.
			f.waitSetState("names", lvmv2.StateReady, "")

			class, dc := "lvms-"+f.ns+"-vg1", f.ns+"-vg1"
			var csiDriver storagev1.CSIDriver
			if !optest.Get(t, f.c, client.ObjectKey{Name: tc.driver}, &csiDriver) || csiDriver.Labels[names.OwnerNamespaceLabel] != f.ns {
				t.Errorf("CSIDriver %s = %+v, want it created for namespace %s", tc.driver, csiDriver.ObjectMeta, f.ns)
			}
			var sc storagev1.StorageClass
			if !optest.Get(t, f.c, client.ObjectKey{Name: class}, &sc) {
				t.Fatalf("StorageClass %s missing", class)
			}
			if sc.Provisioner != tc.driver || sc.Parameters[tc.driver+"/device-class"] != dc || len(sc.Parameters) != 2 {
				t.Errorf("StorageClass provisioner %s parameters %v, want %s and %s/device-class=%s", sc.Provisioner, sc.Parameters, tc.driver, tc.driver, dc)
			}
			c, err := client.New(env.Config, client.Options{Scheme: operator.NewScheme()})
			if err != nil {
				t.Fatal(err)
			}
			var vsc snapshotv1.VolumeSnapshotClass
			optest.Eventually(t, "VolumeSnapshotClass "+class, func() (bool, string) {
				return optest.Get(t, c, client.ObjectKey{Name: class}, &vsc), ""
			})
			if vsc.Driver != tc.driver || vsc.Parameters[tc.driver+"/device-class"] != dc {
				t.Errorf("VolumeSnapshotClass driver %s parameters %v, want %s and %s/device-class=%s", vsc.Driver, vsc.Parameters, tc.driver, tc.driver, dc)
			}
			var ds appsv1.DaemonSet
			if !optest.Get(t, f.c, client.ObjectKey{Namespace: f.ns, Name: names.NodeAgent}, &ds) {
				t.Fatalf("node agent DaemonSet missing")
			}
			if args := ds.Spec.Template.Spec.Containers[0].Args; slices.Contains(args, "--legacy") != tc.legacy {
				t.Errorf("node agent args %v, want --legacy exactly when the operator is legacy (%v)", args, tc.legacy)
			}
		})
	}
}

func TestProvider_NodeAgentPlacementIsTheUnionOfEveryClaim(t *testing.T) {
	f := newFixture(t, nil)
	dedicated := corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "storage", Effect: corev1.TaintEffectNoSchedule}
	a := f.set("a", "zone-a", "vg1")
	a.Spec.Tolerations = []corev1.Toleration{dedicated}
	b := f.set("b", "zone-b", "vg2")
	f.create(a)
	f.create(b)
	var ds appsv1.DaemonSet
	key := client.ObjectKey{Namespace: f.ns, Name: names.NodeAgent}
	optest.Eventually(t, "the node agent DaemonSet on both sets' nodes", func() (bool, string) {
		if !optest.Get(t, f.c, key, &ds) || ds.Spec.Template.Spec.Affinity == nil {
			return false, "no DaemonSet with affinity yet"
		}
		terms := ds.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		return len(terms) == 2, optest.Describe(terms)
	})
	pod := ds.Spec.Template.Spec
	if !slices.ContainsFunc(pod.Tolerations, func(t corev1.Toleration) bool { return t.Key == "dedicated" && t.Value == "storage" }) ||
		!slices.ContainsFunc(pod.Tolerations, func(t corev1.Toleration) bool { return t.Key == corev1.TaintNodeNotReady }) {
		t.Errorf("tolerations = %+v, want the set's and the node lifecycle ones", pod.Tolerations)
	}
	c := pod.Containers[0]
	if pod.ServiceAccountName != names.NodeAgent || pod.PriorityClassName == "" || c.Resources.Requests.Memory().IsZero() ||
		!slices.Contains(c.Args, "--namespace="+f.ns) || slices.Contains(c.Args, "--configuration-policy=ExternalConfiguration") {
		t.Errorf("pod spec = %+v", pod)
	}
	// The kubelet probes the port the agent serves its health endpoints on, and metrics are on.
	port := func(name string) int32 {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort
			}
		}
		return 0
	}
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" ||
		c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" ||
		c.LivenessProbe.HTTPGet.Port.StrVal != "health" || c.ReadinessProbe.HTTPGet.Port.StrVal != "health" {
		t.Errorf("probes: liveness %+v readiness %+v, want /healthz and /readyz on the health port", c.LivenessProbe, c.ReadinessProbe)
	}
	if want := fmt.Sprintf("--health-probe-bind-address=:%d", port("health")); port("health") == 0 || !slices.Contains(c.Args, want) {
		t.Errorf("args %q, ports %+v: want %s", c.Args, c.Ports, want)
	}
	if want := fmt.Sprintf("--metrics-bind-address=:%d", port("metrics")); port("metrics") == 0 || !slices.Contains(c.Args, want) {
		t.Errorf("args %q, ports %+v: want metrics on (%s)", c.Args, c.Ports, want)
	}

	// An LVMCluster with ExternalConfiguration needs the agent on every node, reading the host file.
	ext := &lvmv1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: "microshift", Namespace: f.ns},
		Spec: lvmv1.LVMClusterSpec{ConfigurationPolicy: lvmv1.ConfigurationPolicyExternal}}
	f.create(ext)
	optest.Eventually(t, "the DaemonSet on every node, reading the host lvmd.yaml", func() (bool, string) {
		optest.Get(t, f.c, key, &ds)
		return ds.Spec.Template.Spec.Affinity == nil && slices.Contains(ds.Spec.Template.Spec.Containers[0].Args, "--configuration-policy=ExternalConfiguration"),
			optest.Describe(ds.Spec.Template.Spec.Containers[0].Args)
	})
}

func TestNodeSet_StorageClassNameTakenIsReportedNotTakenOver(t *testing.T) {
	f := newFixture(t, optest.ReportReady)
	f.node("a", "zone-a")
	f.node("b", "zone-b")
	first := f.set("first", "zone-a", "vg1")
	f.create(first)
	f.waitSetState("first", lvmv2.StateReady, "")
	second := f.set("second", "zone-b", "vg1") // the same device class name: the same StorageClass name
	f.create(second)
	sc := "lvms-" + f.ns + "-vg1"
	got := f.waitSetState("second", lvmv2.StateFailed, "StorageClass "+sc+" for device class "+f.ns+"-vg1 already exists and belongs to LVMNodeSet "+f.ns+"/first")
	if c := optest.Condition(got.Status.Conditions, lvmv2.ConditionProviderReady); c == nil || c.Reason != "ClassNameTaken" {
		t.Errorf("ProviderReady = %+v, want ClassNameTaken", c)
	}
	f.waitSetState("first", lvmv2.StateReady, "")
}

// An LVMNode on a node no selector matches (a set left it there for its volumes) keeps the node agent on
// that node by name; LVMNodes the sets create on the nodes they select do not (the provider ignores their
// creation, which at scale made a pass over every LVMNode per batch of creations).
func TestProvider_AgentStaysWhereAnLVMNodeIsLeft(t *testing.T) {
	f := newFixture(t, optest.ReportReady)
	f.node("in", "zone-a")
	out := f.node("out", "zone-b")
	f.create(f.set("a", "zone-a", "vg1"))
	var ds appsv1.DaemonSet
	key := client.ObjectKey{Namespace: f.ns, Name: names.NodeAgent}
	terms := func() []corev1.NodeSelectorTerm {
		if !optest.Get(t, f.c, key, &ds) || ds.Spec.Template.Spec.Affinity == nil {
			return nil
		}
		return ds.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	f.waitSetState("a", lvmv2.StateReady, "")
	if got := terms(); len(got) != 1 || len(got[0].MatchFields) != 0 {
		t.Fatalf("DaemonSet terms = %s, want the set's selector alone", optest.Describe(got))
	}
	f.create(&lvmv2.LVMNode{ObjectMeta: metav1.ObjectMeta{Name: out.Name, Namespace: f.ns}})
	optest.Eventually(t, "the node agent kept on "+out.Name+" by name", func() (bool, string) {
		got := terms()
		return slices.ContainsFunc(got, func(term corev1.NodeSelectorTerm) bool {
			return len(term.MatchFields) == 1 && slices.Equal(term.MatchFields[0].Values, []string{out.Name})
		}), optest.Describe(got)
	})
}
