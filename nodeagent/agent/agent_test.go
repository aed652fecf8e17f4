package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	corev1 "k8s.io/api/core/v1"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/status"
)

func reqFor(a *Agent) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: a.opts.Namespace, Name: a.opts.NodeName}}
}

func term(reqs ...lvmv2.DeviceSelectorRequirement) lvmv2.DeviceSelectorTerm {
	return lvmv2.DeviceSelectorTerm{MatchExpressions: reqs}
}

func expr(key lvmv2.DeviceSelectorKey, op lvmv2.DeviceSelectorOperator, values ...string) lvmv2.DeviceSelectorRequirement {
	return lvmv2.DeviceSelectorRequirement{Key: key, Operator: op, Values: values}
}

// seedLVMNode is the seed's LVMNode on the server fixture: vg1 names a missing device and the NVMe disk
// holding vg1 and its thin pool; othervg is a wildcard over partitions and over that same NVMe disk.
func seedLVMNode(ns, name string) *lvmv2.LVMNode {
	return &lvmv2.LVMNode{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: lvmv2.LVMNodeSpec{
			VolumeGroups: []lvmv2.VolumeGroup{
				{Name: "vg1", DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{
					term(expr(lvmv2.KeyKName, lvmv2.OpIn, "/dev/mapper/some-encrypted-device", "/dev/nvme1n1"))}}},
				{Name: "othervg", DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{
					term(expr(lvmv2.KeyKName, lvmv2.OpAny), expr(lvmv2.KeyType, lvmv2.OpIn, "part")),
					term(expr(lvmv2.KeyKName, lvmv2.OpAny), expr(lvmv2.KeySerial, lvmv2.OpIn, "Y0B0A0KZT8E9"))}}},
			},
			DeviceClasses: []lvmv2.DeviceClass{{Name: "thinly-provisioned", Strategy: lvmv2.StrategyThin, VolumeGroup: "vg1", Default: true,
				Thin: &lvmv2.ThinConfig{PoolName: "thin-pool-1", SizePercent: 90, OverprovisionRatio: 10}}},
			LVMD: &lvmv2.LVMDConfig{SocketName: "/run/topolvm/lvmd.sock"},
		},
	}
}

// shape lists the JSON paths of a document, with list indexes replaced by [].
func shape(t *testing.T, v any) []string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				walk(prefix+"."+k, c)
			}
		case []any:
			for _, c := range x {
				walk(prefix+"[]", c)
			}
		default:
			seen[prefix] = true
		}
	}
	walk("", doc)
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// missingPaths returns the paths of want that got lacks, ignoring those with one of the skipped prefixes.
func missingPaths(got, want []string, skip ...string) []string {
	var out []string
	for _, p := range want {
		if slices.Contains(got, p) || slices.ContainsFunc(skip, func(s string) bool { return strings.HasPrefix(p, s) }) {
			continue
		}
		out = append(out, p)
	}
	return out
}

func loadSampleStatus(t *testing.T, name string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "deploy", "samples", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatal(err)
	}
}

func TestAgent_LVMNodeStatusMatchesSeedShape(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	host := newServerHost(t)
	a, ns := newTestAgent(t, host, nil)
	ln := seedLVMNode(ns, a.opts.NodeName)
	if err := env.Client.Create(ctx, ln); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, a)

	var got lvmv2.LVMNode
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ln), &got); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got.Finalizers, LVMNodeFinalizer) {
		t.Errorf("finalizers = %v", got.Finalizers)
	}
	st := got.Status
	if st.ObservedGeneration != got.Generation || len(st.VolumeGroups) != 2 {
		t.Fatalf("status = %s", mustJSON(st))
	}
	vg1 := st.VolumeGroups[0]
	if vg1.Name != "vg1" || vg1.State != lvmv2.StateHealthy || vg1.Size == nil || len(vg1.Devices.Included) != 1 || vg1.Devices.Included[0].KName != "/dev/nvme1n1" {
		t.Errorf("vg1 = %s", mustJSON(vg1))
	}
	wantNotFound := lvmv2.ExcludedDevice{KName: "/dev/mapper/some-encrypted-device", Reasons: []string{"/dev/mapper/some-encrypted-device was not found on this node"}, ReasonCodes: []string{"NotFound"}}
	if len(vg1.Devices.Excluded) != 1 || !reflect.DeepEqual(vg1.Devices.Excluded[0], wantNotFound) {
		t.Errorf("vg1 excluded = %s", mustJSON(vg1.Devices.Excluded))
	}
	if len(vg1.Volumes) != 1 || vg1.Volumes[0].Name != "thin-pool-1" || vg1.Volumes[0].MetadataPercent != "30.0" || vg1.Volumes[0].Attributes != "twi-aotz--" {
		t.Errorf("vg1 volumes = %s", mustJSON(vg1.Volumes))
	}
	reasons := map[string][]string{}
	for _, e := range st.VolumeGroups[1].Devices.Excluded {
		reasons[e.KName] = e.Reasons
	}
	if !slices.Contains(reasons["/dev/sda1"], "/dev/sda1 was used as a boot partition and cannot be used") ||
		!slices.Contains(reasons["/dev/nvme1n1"], "/dev/nvme1n1 is already being used by vg1 and cannot be used by a wildcard (Any) volumeGroup") {
		t.Errorf("othervg excluded = %s", mustJSON(st.VolumeGroups[1].Devices.Excluded))
	}
	if len(st.DeviceClasses) != 1 || st.DeviceClasses[0].State != lvmv2.StateHealthy {
		t.Errorf("device classes = %s", mustJSON(st.DeviceClasses))
	}
	for _, typ := range []string{lvmv2.ConditionVolumeGroupsHealthy, lvmv2.ConditionDeviceClassesHealthy, lvmv2.ConditionLVMDConfigured} {
		c, ok := status.FindCondition(st.Conditions, typ)
		if !ok || c.ObservedGeneration != got.Generation || c.Reason == "" || c.Message == "" {
			t.Errorf("condition %s = %+v", typ, c)
		}
	}

	// The seed's example: every field it shows is there, except what the operator writes.
	var sample lvmv2.LVMNode
	loadSampleStatus(t, "lvm_v2alpha1_lvmnode.yaml", &sample)
	if miss := missingPaths(shape(t, st), shape(t, sample.Status), ".deviceClasses[].storageClass", ".deviceClasses[].snapshotClass", ".volumeGroups[].volumes[].size", ".volumeGroups[].volumes[].dataPercent"); len(miss) > 0 {
		t.Errorf("status lacks fields of the seed's example: %v\nstatus: %s", miss, mustJSON(st))
	}

	cfg, err := lvmd.Load(a.opts.LVMDConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	want := []lvmd.DeviceClass{{Name: "thinly-provisioned", VolumeGroup: "vg1", Default: true, Type: lvmd.TypeThin, ThinPool: &lvmd.ThinPoolConfig{Name: "thin-pool-1", OverprovisionRatio: 10,
		DataUsageThreshold: new(90.0), MetadataUsageThreshold: new(75.0)}}}
	if !reflect.DeepEqual(cfg.DeviceClasses, want) || cfg.SocketName != "/run/topolvm/lvmd.sock" {
		t.Errorf("lvmd.yaml = %+v", cfg)
	}
	if ch := host.changes(); len(ch) != 0 {
		t.Errorf("the agent tried to change the disks: %v", ch)
	}

	// A second pass with nothing new writes nothing.
	before := got.ResourceVersion
	reconcileOnce(t, a)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ln), &got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != before {
		t.Errorf("an idle pass rewrote the LVMNode (resourceVersion %s -> %s)", before, got.ResourceVersion)
	}
}

// v1VolumeGroup is the operator's LVMVolumeGroup vg1 of owner (nil: a hand-made one).
func v1VolumeGroup(ns string, owner *lvmv1.LVMCluster) *lvmv1.LVMVolumeGroup {
	var refs []metav1.OwnerReference
	if owner != nil {
		refs = []metav1.OwnerReference{*metav1.NewControllerRef(owner, lvmv1.GroupVersion.WithKind("LVMCluster"))}
	}
	return &lvmv1.LVMVolumeGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vg1", OwnerReferences: refs},
		Spec: lvmv1.LVMVolumeGroupSpec{
			Default:        true,
			DeviceSelector: &lvmv1.DeviceSelector{Paths: []lvmv1.DevicePath{"/dev/disk/by-id/nvme-eui.36564630525003820025384500000002", "/dev/nvme1n1"}},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "storage", Operator: corev1.NodeSelectorOpIn, Values: []string{"lvms"}}}}}},
			ThinPoolConfig: &lvmv1.ThinPoolConfig{Name: "thin-pool-1", SizePercent: 90, OverprovisionRatio: 10,
				ChunkSizeCalculationPolicy: lvmv1.ChunkSizeCalculationPolicyHost, MetadataSizeCalculationPolicy: lvmv1.MetadataSizePolicyHost},
		},
	}
}

func TestAgent_V1NodeStatusAndRefusedDeletion(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	host := newServerHost(t)
	a, ns := newTestAgent(t, host, map[string]string{"storage": "lvms"})
	vg := v1VolumeGroup(ns, newCluster(t, ns, "lvms", ""))
	if err := env.Client.Create(ctx, vg); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, a)

	var nsObj lvmv1.LVMVolumeGroupNodeStatus
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: a.opts.NodeName}, &nsObj); err != nil {
		t.Fatalf("LVMVolumeGroupNodeStatus not created: %v", err)
	}
	wantVG := lvmv1.VGStatus{Name: "vg1", Status: lvmv1.VGStatusDegraded, Devices: []string{"/dev/nvme1n1"}, DeviceDiscoveryPolicy: lvmv1.DeviceDiscoveryPolicyPreconfigured}
	if len(nsObj.Spec.LVMVGStatus) != 1 {
		t.Fatalf("nodeStatus = %s", mustJSON(nsObj.Spec))
	}
	got := nsObj.Spec.LVMVGStatus[0]
	if got.Name != wantVG.Name || !reflect.DeepEqual(got.Devices, wantVG.Devices) || got.DeviceDiscoveryPolicy != wantVG.DeviceDiscoveryPolicy {
		t.Errorf("nodeStatus[0] = %s", mustJSON(got))
	}
	// The fixture's pool uses 128 KiB chunks; the v1 class asks lvm2 to choose (Host), so it is healthy.
	if got.Status != lvmv1.VGStatusReady {
		t.Errorf("vg1 status %s: %s", got.Status, got.Reason)
	}
	if nsObj.Status.ObservedGeneration != nsObj.Generation || len(nsObj.Status.Conditions) != 3 {
		t.Errorf("status = %s", mustJSON(nsObj.Status))
	}
	// What LVMS's shape has no field for is in the node-facts annotation: the volume group's size.
	facts, err := lvmv1.ParseNodeFacts(nsObj.Annotations)
	if f, ok := facts.VolumeGroups["vg1"]; err != nil || !ok || f.Size == nil || f.Size.IsZero() {
		t.Errorf("node facts %q (%v), want vg1's size", nsObj.Annotations[lvmv1.NodeFactsAnnotation], err)
	}
	var sample lvmv1.LVMVolumeGroupNodeStatus
	loadSampleStatus(t, "lvm_v1alpha1_lvmvolumegroupnodestatus.yaml", &sample)
	if miss := missingPaths(shape(t, nsObj.Status), shape(t, sample.Status)); len(miss) > 0 {
		t.Errorf("status lacks fields of the sample: %v", miss)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vg), vg); err != nil || !slices.Contains(vg.Finalizers, VolumeGroupFinalizer(a.opts.NodeName)) {
		t.Fatalf("LVMVolumeGroup finalizers = %v (%v)", vg.Finalizers, err)
	}

	// Deleting the volume group: a TopoLVM volume is still in it, so everything is kept.
	if err := env.Client.Delete(ctx, vg); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, a)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(vg), vg); err != nil {
		t.Fatalf("the LVMVolumeGroup must stay while its volume group holds volumes: %v", err)
	}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: a.opts.NodeName}, &nsObj); err != nil {
		t.Fatal(err)
	}
	if r := nsObj.Spec.LVMVGStatus[0]; r.Status != lvmv1.VGStatusDegraded || !strings.Contains(r.Reason, "still holds 1 logical volume(s) LVMS did not create for itself (6c2d1e0a-9a1b-4d7e-8f00-2b7c3c1d9e11)") {
		t.Errorf("deleting vg1 = %s", mustJSON(r))
	}
	c, _ := status.FindCondition(nsObj.Status.Conditions, lvmv2.ConditionVolumeGroupsHealthy)
	if c.Reason != status.ReasonManualCleanupRequired {
		t.Errorf("VolumeGroupsHealthy = %+v", c)
	}
	if host.count("lvm vgremove") != 0 || host.count("lvm lvremove") != 0 {
		t.Errorf("removed something: %v", host.changes())
	}
}

func TestAgent_ExternalConfiguration(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	host := newServerHost(t)
	a, ns := newTestAgent(t, host, nil)
	newCluster(t, ns, "lvms", lvmv1.ConfigurationPolicyExternal)
	path := a.opts.LVMDConfigPath
	conditions := func() map[string]string {
		t.Helper()
		a.Watcher().Reload()
		reconcileOnce(t, a)
		var obj lvmv1.LVMVolumeGroupNodeStatus
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: a.opts.NodeName}, &obj); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, c := range obj.Status.Conditions {
			out[c.Type] = string(c.Status) + " " + c.Reason + ": " + c.Message
		}
		return out
	}
	steps := []struct {
		name    string
		content string // empty: no file
		want    map[string]string
	}{
		{"no file", "", map[string]string{lvmv2.ConditionLVMDConfigured: "False Missing: configurationPolicy is ExternalConfiguration but " + path + " does not exist on this node"}},
		{"a typo in a key", "devce-classes: []\n", map[string]string{lvmv2.ConditionLVMDConfigured: `False Invalid: ` + path +
			` is not a valid lvmd configuration: device-classes is empty: lvmd needs at least one device class; keys nothing reads (TopoLVM ignores them too): line 1: unknown key "devce-classes"`}},
		{"wrong type", "device-classes:\n  - name: ssd\n    volume-group: vg1\n    spare-gb: ten\n", map[string]string{lvmv2.ConditionLVMDConfigured: "False Invalid: "}},
		{"missing volume group", "device-classes:\n  - name: ssd\n    volume-group: vg9\n", map[string]string{
			lvmv2.ConditionLVMDConfigured:       "True Valid: ",
			lvmv2.ConditionDeviceClassesHealthy: "False VolumeGroupNotReady: device class ssd uses volume group vg9, which does not exist on this node",
		}},
		{"a key TopoLVM ignores", "device-classes:\n  - name: ssd\n    volume-group: vg1\n    colour: blue\n", map[string]string{
			lvmv2.ConditionLVMDConfigured: "True Valid: the host lvmd.yaml (" + path + `) is valid and lists 1 device classes; keys nothing reads (TopoLVM ignores them too): line 4: unknown key "colour" in device-classes[0]`,
		}},
		{"fixed", "device-classes:\n  - name: ssd\n    volume-group: vg1\n    type: thin\n    thin-pool:\n      name: thin-pool-1\n      overprovision-ratio: 5\n", map[string]string{
			lvmv2.ConditionLVMDConfigured:       "True Valid: ",
			lvmv2.ConditionDeviceClassesHealthy: "True AllHealthy",
			lvmv2.ConditionVolumeGroupsHealthy:  "True ExternalConfiguration",
		}},
	}
	for _, step := range steps {
		if step.content != "" {
			if err := os.WriteFile(path, []byte(step.content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got := conditions()
		for typ, want := range step.want {
			if !strings.HasPrefix(got[typ], want) {
				t.Errorf("%s: %s = %q, want it to start with %q", step.name, typ, got[typ], want)
			}
		}
	}
	data, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(data), "device-classes:\n  - name: ssd") {
		t.Errorf("the agent rewrote the host's lvmd.yaml: %q", data)
	}
	if len(host.changes()) != 0 {
		t.Errorf("commands that change disks ran: %v", host.changes())
	}
}

// TestAgent_TwoAgentsInOneManager runs two agents (two simulated nodes) in one manager, as the local
// sandbox does, and waits for both to publish status on their own; then a deletion that must wait emits
// a warning event.
func TestAgent_TwoAgentsInOneManager(t *testing.T) {
	testenv.Require(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	host := newServerHost(t)
	a1, ns := newTestAgent(t, host, map[string]string{"storage": "lvms"})
	a2, err := New(env.Client, Options{NodeName: a1.opts.NodeName + "-b", Namespace: ns, Runner: a1.opts.Runner,
		LVMDConfigPath: filepath.Join(t.TempDir(), "lvmd.yaml"), Root: a1.opts.Root, LVMDPollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// The logger goes to the test's log while it runs and nowhere after: ctrl.SetLogger keeps the first
	// logger set for the whole binary, and a manager of a later test or benchmark logging through it after
	// this test ended would panic the binary ("Log in goroutine after … has completed").
	var logging sync.Mutex
	ended := false
	t.Cleanup(func() { logging.Lock(); ended = true; logging.Unlock() }) // before the manager's: runs after it stopped
	logger := funcr.New(func(prefix, args string) {
		logging.Lock()
		defer logging.Unlock()
		if !ended {
			t.Log(prefix, args)
		}
	}, funcr.Options{})
	ctrl.SetLogger(logger)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Logger: logger, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []*Agent{a1, a2} {
		if err := a.SetupWithManager(mgr); err != nil {
			t.Fatalf("setup %s: %v", a.Name(), err)
		}
	}
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// a2's node uses the v2 API; a1's node carries the label the v1 LVMVolumeGroup selects.
	if err := env.Client.Create(ctx, seedLVMNode(ns, a2.opts.NodeName)); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, v1VolumeGroup(ns, newCluster(t, ns, "lvms", ""))); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a2's LVMNode has status and a1's LVMVolumeGroupNodeStatus lists vg1", func() bool {
		var ln lvmv2.LVMNode
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: a2.opts.NodeName}, &ln); err != nil || ln.Status.ObservedGeneration == 0 {
			return false
		}
		var st lvmv1.LVMVolumeGroupNodeStatus
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: a1.opts.NodeName}, &st)
		return err == nil && len(st.Spec.LVMVGStatus) == 1 && st.Spec.LVMVGStatus[0].Name == "vg1"
	})
	eventually(t, "a1 holds its finalizer on the LVMVolumeGroup", func() bool {
		var vg lvmv1.LVMVolumeGroup
		err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "vg1"}, &vg)
		return err == nil && slices.Contains(vg.Finalizers, VolumeGroupFinalizer(a1.opts.NodeName)) && !slices.Contains(vg.Finalizers, VolumeGroupFinalizer(a2.opts.NodeName))
	})
	var vg lvmv1.LVMVolumeGroup
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "vg1"}, &vg); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, &vg); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a ManualCleanupRequired event on the LVMVolumeGroup", func() bool {
		var evs eventsv1.EventList
		if err := env.Client.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == "ManualCleanupRequired" && e.Regarding.Name == "vg1" && e.Type == corev1.EventTypeWarning {
				return true
			}
		}
		return false
	})
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "vg1"}, &vg); apierrors.IsNotFound(err) {
		t.Error("the LVMVolumeGroup went away although its volume group still holds a volume")
	}
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// garbledHost prints something that is not lsblk's JSON.
type garbledHost struct{ serverHost }

func (g *garbledHost) Execute(ctx context.Context, cmd lvm.Command) (lvm.Result, error) {
	if cmd.Argv[0] == "lsblk" {
		return lvm.Result{Stdout: []byte("lsblk: cannot open /sys/dev/block: Permission denied\n{")}, nil
	}
	return g.serverHost.Execute(ctx, cmd)
}

func TestAgent_UnreadableDiscoveryIsReported(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	host := &garbledHost{serverHost: *newServerHost(t)}
	a, ns := newTestAgent(t, host, nil)
	if err := env.Client.Create(ctx, seedLVMNode(ns, a.opts.NodeName)); err != nil {
		t.Fatal(err)
	}
	reconcileOnce(t, a)
	var ln lvmv2.LVMNode
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: a.opts.NodeName}, &ln); err != nil {
		t.Fatal(err)
	}
	c, _ := status.FindCondition(ln.Status.Conditions, lvmv2.ConditionVolumeGroupsHealthy)
	if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "could not read the node's devices and LVM state") || !strings.Contains(c.Message, "parse lsblk JSON") {
		t.Errorf("VolumeGroupsHealthy = %+v", c)
	}
	if ln.Status.State != lvmv2.StateProgressing {
		t.Errorf("state = %s", ln.Status.State)
	}
}

// TestAgent_ExternalConfigurationReloadsWithoutRestart runs the agent in a manager with
// --configuration-policy=ExternalConfiguration: a fix to the host's lvmd.yaml reaches the status without a
// restart and without any change to an API object.
func TestAgent_ExternalConfigurationReloadsWithoutRestart(t *testing.T) {
	testenv.Require(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	host := newServerHost(t)
	base, ns := newTestAgent(t, host, nil)
	path := base.opts.LVMDConfigPath
	if err := os.WriteFile(path, []byte("device-classes:\n  - name: ssd\n    volume-group: vg1\n    spare-gb: ten\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := base.opts
	opts.ForceExternal, opts.LVMDPollInterval = true, 20*time.Millisecond
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(mgr.GetClient(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	// The agent runs once at start (the lvmd.yaml watcher reports the file it found).
	lvmdCondition := func() metav1.Condition {
		var st lvmv1.LVMVolumeGroupNodeStatus
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: a.opts.NodeName}, &st); err != nil {
			return metav1.Condition{}
		}
		c, _ := status.FindCondition(st.Status.Conditions, lvmv2.ConditionLVMDConfigured)
		return c
	}
	eventually(t, "LVMDConfigured=False naming the value of the wrong type", func() bool {
		c := lvmdCondition()
		return c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "spare-gb")
	})
	if err := os.WriteFile(path, []byte("device-classes:\n  - name: ssd\n    volume-group: vg1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "LVMDConfigured=True after the file was fixed", func() bool {
		return lvmdCondition().Status == metav1.ConditionTrue
	})
}
