package console_test

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/console"
	"github.com/lvms-dev/lvms/console/consoletest"
)

func prepared() *console.Snapshot {
	return console.FromObjects(consoletest.Prepared("lvms"), consoletest.At)
}

func TestBuildOverview(t *testing.T) {
	o := console.BuildOverview(prepared())
	if !o.Installed {
		t.Error("Installed = false")
	}
	var names []string
	for _, n := range o.Nodes {
		names = append(names, n.Name+"="+n.State)
	}
	if want := []string{"worker-b=Degraded", "worker-a=Ready", "worker-c=Ready"}; !slices.Equal(names, want) {
		t.Errorf("nodes = %v, want %v (all three need attention, the Degraded one first, then by name)", names, want)
	}
	b := o.Nodes[slices.IndexFunc(o.Nodes, func(n console.NodeSummary) bool { return n.Name == consoletest.NodeB })]
	if b.Missing != 1 || b.Excluded != 6 || b.Health != console.HealthError {
		t.Errorf("worker-b summary = %+v, want 1 missing, 6 excluded, health error", b)
	}
	if o.Totals.Nodes != 3 || o.Totals.NodesReady != 2 || o.Totals.Volumes != 2 || o.Totals.DeviceClasses != 3 {
		t.Errorf("totals = %+v", o.Totals)
	}
	wantDiffs := []string{
		"worker-b vg1 /dev/nvme1n1 NotFound",
		"worker-a vg1  ThinPoolMetadataHigh",
		"  bulk StorageClassMissing",
	}
	var got []string
	for _, d := range o.Differences {
		got = append(got, strings.Join([]string{d.Node, d.VolumeGroup, d.Device + d.DeviceClass, d.Explanation.Code}, " "))
	}
	for _, w := range wantDiffs {
		if !slices.Contains(got, w) {
			t.Errorf("differences %q do not contain %q", got, w)
		}
	}
	if n := strings.Count(strings.Join(got, "\n"), "StorageClassMissing"); n != 1 {
		t.Errorf("StorageClassMissing listed %d times, want once for the cluster", n)
	}
	if o.Differences[0].Health != console.HealthError {
		t.Errorf("first difference %+v is not the worst", o.Differences[0])
	}
	if len(o.Owners) != 2 || o.Owners[0].Ref.Kind != "LVMNodeSet" || o.Owners[0].Ready != 2 || o.Owners[1].Ref.Kind != "LVMCluster" || o.Owners[1].Ready != 1 {
		t.Errorf("owners = %+v", o.Owners)
	}
}

func TestNode_DeviceStates(t *testing.T) {
	s := prepared()
	tests := []struct {
		node, vg, kname string
		want            console.DeviceState
		wantDiffers     bool
		wantCodes       []string
	}{
		{consoletest.NodeB, "vg1", consoletest.MissingDevice, console.DeviceMissing, true, []string{"NotFound"}},
		{consoletest.NodeB, "vg1", "/dev/nvme0n1", console.DeviceInVG, false, nil},
		{consoletest.NodeB, "scratch", "/dev/sdb", console.DeviceExcluded, false, []string{"Mounted", "ForeignSignature"}},
		{consoletest.NodeB, "scratch", "/dev/sdd", console.DeviceExcluded, false, []string{consoletest.UnknownCode}},
		{consoletest.NodeA, "vg1", consoletest.MissingDevice, console.DeviceWiped, false, nil},
		{consoletest.NodeC, "legacy", "/dev/vdb", console.DeviceInVG, false, nil},
		{consoletest.NodeC, "legacy", "/dev/vdc", console.DeviceExcluded, false, []string{"OtherVolumeGroup"}},
	}
	for _, tc := range tests {
		t.Run(tc.node+tc.kname, func(t *testing.T) {
			v, err := console.Node(s, tc.node)
			if err != nil {
				t.Fatal(err)
			}
			r := findRow(t, v, tc.vg, tc.kname)
			var codes []string
			for _, rs := range r.Reasons {
				codes = append(codes, rs.Code)
				if rs.Explanation.Why == "" || len(rs.Explanation.Next) == 0 {
					t.Errorf("reason %s has no explanation", rs.Code)
				}
			}
			if r.State != tc.want || r.Differs != tc.wantDiffers || !slices.Equal(codes, tc.wantCodes) {
				t.Errorf("row = state %s differs %v codes %v, want %s %v %v", r.State, r.Differs, codes, tc.want, tc.wantDiffers, tc.wantCodes)
			}
		})
	}
}

func findRow(t *testing.T, v *console.NodeView, vg, kname string) console.DeviceRow {
	t.Helper()
	for _, g := range v.VolumeGroups {
		if g.Name != vg {
			continue
		}
		for _, r := range g.Devices {
			if r.KName == kname {
				return r
			}
		}
	}
	t.Fatalf("no row %s in %s on %s", kname, vg, v.Name)
	return console.DeviceRow{}
}

func TestNode_UnknownNodeIsNotFound(t *testing.T) {
	_, err := console.Node(prepared(), "no-such-node")
	var nf *console.NotFoundError
	if !errors.Is(err, console.ErrNotFound) || !errors.As(err, &nf) || nf.Kind != "node" {
		t.Fatalf("err = %v, want a node NotFoundError", err)
	}
}

func TestNode_ThinPoolAndClasses(t *testing.T) {
	v, err := console.Node(prepared(), consoletest.NodeA)
	if err != nil {
		t.Fatal(err)
	}
	g := v.VolumeGroups[slices.IndexFunc(v.VolumeGroups, func(g console.VolumeGroupView) bool { return g.Name == "vg1" })]
	if len(g.Pools) != 1 || g.Pools[0].MetadataPercent == nil || *g.Pools[0].MetadataPercent != 92.3 || g.Pools[0].Health != console.HealthError {
		t.Fatalf("pools = %+v, want thin-pool at 92.3%% metadata, health error", g.Pools)
	}
	bulk := v.DeviceClasses[slices.IndexFunc(v.DeviceClasses, func(d console.NodeDeviceClass) bool { return d.Name == "bulk" })]
	if bulk.StorageClass == nil || !bulk.StorageClass.Differs || bulk.StorageClass.Name != consoletest.MissingSC || bulk.Health != console.HealthError {
		t.Errorf("bulk = %+v, want its StorageClass bulk-storage missing", bulk)
	}
	var fast console.Capacity
	for _, c := range v.Capacity {
		if c.DeviceClass == "fast" {
			fast = c
		}
	}
	if fast.Size.Human != "180 GiB" || fast.Provisioned.Human != "10 GiB" || !fast.Known {
		t.Errorf("fast capacity = %+v, want pool size 180 GiB, 10 GiB provisioned", fast)
	}
	if len(v.Volumes) != 2 || len(v.Events) != 1 || v.Events[0].Reason != "VolumeGroupReady" {
		t.Errorf("volumes %d, events %+v: want 2 volumes and worker-a's event", len(v.Volumes), v.Events)
	}
}

func TestDevice_Verdicts(t *testing.T) {
	s := prepared()
	tests := []struct {
		name, node, kname string
		want              map[string]string
		wantErr           bool
	}{
		{name: "two failing filters", node: consoletest.NodeB, kname: "/dev/sdb",
			want: map[string]string{"Mounted": console.OutcomeExcluded, "ForeignSignature": console.OutcomeExcluded, "ReadOnly": console.OutcomePassed}},
		{name: "not found stops evaluation", node: consoletest.NodeB, kname: consoletest.MissingDevice,
			want: map[string]string{"NotFound": console.OutcomeExcluded, "ReadOnly": console.OutcomeNotEvaluated}},
		{name: "unknown code is kept", node: consoletest.NodeB, kname: "/dev/sdd",
			want: map[string]string{consoletest.UnknownCode: console.OutcomeExcluded, "Mounted": console.OutcomePassed}},
		{name: "unknown device", node: consoletest.NodeB, kname: "/dev/nope", wantErr: true},
		{name: "unknown node", node: "nope", kname: "/dev/sdb", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := console.Device(s, tc.node, tc.kname)
			if tc.wantErr {
				if !errors.Is(err, console.ErrNotFound) {
					t.Fatalf("err = %v, want not found", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, e := range d.Entries {
				for _, v := range e.Verdicts {
					got[v.Code] = v.Outcome
				}
			}
			for code, outcome := range tc.want {
				if got[code] != outcome {
					t.Errorf("verdict %s = %q, want %q", code, got[code], outcome)
				}
			}
		})
	}
}

// A selector naming devices explicitly makes every other physical volume unexpected, and a named device the
// agent does not list at all missing.
func TestNode_UnexpectedAndUnreportedDevices(t *testing.T) {
	n := &lvmv2.LVMNode{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "x", Generation: 3},
		Spec: lvmv2.LVMNodeSpec{VolumeGroups: []lvmv2.VolumeGroup{{Name: "vg", DeviceSelector: lvmv2.DeviceSelector{
			DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{MatchExpressions: []lvmv2.DeviceSelectorRequirement{
				{Key: lvmv2.KeyPath, Operator: lvmv2.OpIn, Values: []string{"/dev/disk/by-id/a", "/dev/sdz"}}}}}}}}},
		Status: lvmv2.LVMNodeStatus{State: lvmv2.StateReady, ObservedGeneration: 2, VolumeGroups: []lvmv2.VolumeGroupStatus{{Name: "vg", State: lvmv2.StateHealthy,
			Devices: lvmv2.Devices{Included: []lvmv2.Device{{KName: "/dev/sda", Path: "/dev/disk/by-id/a"}, {KName: "/dev/sdq"}}}}}},
	}
	s := console.FromObjects([]client.Object{n}, consoletest.At)
	v, err := console.Node(s, "n1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]console.DeviceState{"/dev/sda": console.DeviceInVG, "/dev/sdq": console.DeviceUnexpected, "/dev/sdz": console.DeviceMissing}
	for kname, state := range want {
		if r := findRow(t, v, "vg", kname); r.State != state {
			t.Errorf("%s = %s, want %s", kname, r.State, state)
		}
	}
	if rows := v.VolumeGroups[0].Devices; !rows[0].Differs || !rows[1].Differs || rows[2].Differs {
		t.Errorf("rows not ordered differing first: %+v", rows)
	}
	var codes []string
	for _, d := range v.Differences {
		codes = append(codes, d.Explanation.Code)
	}
	for _, c := range []string{"UnexpectedDevice", "DeviceNotReported", "StaleStatus", "NodeMissing"} {
		if !slices.Contains(codes, c) {
			t.Errorf("differences %v lack %s", codes, c)
		}
	}
}

// A selector naming /dev/disk/ links, an agent reporting the excluded device by kernel name only (as the
// sandbox's agents do): the link it names is unresolved, not missing, and the device is not "not named".
func TestNode_LinksTheStatusDoesNotResolve(t *testing.T) {
	sel := lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{MatchExpressions: []lvmv2.DeviceSelectorRequirement{
		{Key: lvmv2.KeyPath, Operator: lvmv2.OpIn, Values: []string{"/dev/disk/by-id/disk-a", "/dev/disk/by-id/disk-b"}}}}}}
	n := &lvmv2.LVMNode{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "x"},
		Spec: lvmv2.LVMNodeSpec{VolumeGroups: []lvmv2.VolumeGroup{{Name: "vg", DeviceSelector: sel}}},
		Status: lvmv2.LVMNodeStatus{State: lvmv2.StateReady, VolumeGroups: []lvmv2.VolumeGroupStatus{{Name: "vg", State: lvmv2.StateHealthy,
			Devices: lvmv2.Devices{Included: []lvmv2.Device{{KName: "/dev/loop0", Path: "/dev/disk/by-id/disk-a"}},
				Excluded: []lvmv2.ExcludedDevice{{KName: "/dev/loop1", Reasons: []string{"/dev/loop1 has an ext4 signature"}, ReasonCodes: []string{"ForeignSignature"}}}}}}},
	}
	v, err := console.Node(console.FromObjects([]client.Object{n}, consoletest.At), "n1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]console.DeviceState{"/dev/loop0": console.DeviceInVG, "/dev/loop1": console.DeviceExcluded, "/dev/disk/by-id/disk-b": console.DeviceUnresolved}
	for kname, state := range want {
		if r := findRow(t, v, "vg", kname); r.State != state || r.Differs {
			t.Errorf("%s = %s (differs %v), want %s, not differing", kname, r.State, r.Differs, state)
		}
	}
	if len(v.Differences) != 1 || v.Differences[0].Explanation.Code != "NodeMissing" {
		t.Errorf("differences = %+v, want only the missing Node object", v.Differences)
	}
	if len(v.VolumeGroups[0].Notes) == 0 {
		t.Error("no note explains the unresolved link")
	}
}

func TestHiddenStorageClassesTrustTheAgent(t *testing.T) {
	s := prepared()
	s.StorageClasses = nil
	s.Hidden = []console.HiddenKind{{Resource: "storageclasses.storage.k8s.io", Reason: "forbidden"}}
	for _, dc := range console.DeviceClasses(s) {
		for _, n := range dc.Nodes {
			sc := n.StorageClass
			if sc == nil {
				continue
			}
			if want := sc.Reported == "Missing"; sc.Differs != want {
				t.Errorf("%s on %s: differs = %v with reported %q, want %v", dc.Name, n.Source.Name, sc.Differs, sc.Reported, want)
			}
		}
	}
}

func TestVolumesAndEvents(t *testing.T) {
	s := prepared()
	vs := console.Volumes(s)
	if len(vs) != 2 || vs[0].Name != "pvc-0c3" || vs[0].Health != console.HealthWarning || vs[0].Topic == nil {
		t.Fatalf("volumes = %+v, want the orphaned pvc-0c3 first", vs)
	}
	if v := vs[1]; v.PV != "pvc-0a1" || v.PVC != "lvms/data-db-0" || !slices.Equal(v.Pods, []string{"lvms/db-0"}) || v.PVCPhase != "Bound" {
		t.Errorf("pvc-0a1 = %+v, want PV, claim and pod", v)
	}
	es := console.Events(s)
	if len(es) != 2 || es[0].Reason != "DevicePathCheckFailed" || es[0].Health != console.HealthWarning {
		t.Errorf("events = %+v, want the newest (a warning) first", es)
	}
}

func TestFormatBytes(t *testing.T) {
	tests := map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 200 << 30: "200 GiB", -2048: "-2 KiB"}
	for n, want := range tests {
		if got := console.FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// Malformed status (codes and sentences of different lengths, junk percentages and sizes) must render.
func FuzzNodeView(f *testing.F) {
	f.Add("NotFound", "/dev/x was not found", "92.3", "/dev/x", 2)
	f.Add("", "", "abc%", "", 0)
	f.Fuzz(func(t *testing.T, code, sentence, pct, kname string, n int) {
		n = n % 4
		ex := lvmv2.ExcludedDevice{KName: kname}
		for range n {
			ex.ReasonCodes = append(ex.ReasonCodes, code)
		}
		ex.Reasons = []string{sentence}
		q := resource.MustParse("1Gi")
		node := &lvmv2.LVMNode{ObjectMeta: metav1.ObjectMeta{Name: "n"},
			Spec: lvmv2.LVMNodeSpec{VolumeGroups: []lvmv2.VolumeGroup{{Name: "vg", DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{
				{MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyKName, Operator: lvmv2.OpIn, Values: []string{kname}}}}}}}}},
			Status: lvmv2.LVMNodeStatus{VolumeGroups: []lvmv2.VolumeGroupStatus{{Name: "vg", State: lvmv2.State(code), Size: &q,
				Devices: lvmv2.Devices{Excluded: []lvmv2.ExcludedDevice{ex}},
				Volumes: []lvmv2.LogicalVolumeStatus{{Name: "p", DataPercent: pct, MetadataPercent: pct}}}}}}
		s := console.FromObjects([]client.Object{node}, consoletest.At)
		if _, err := console.Node(s, "n"); err != nil {
			t.Fatal(err)
		}
		console.BuildOverview(s)
		_, _ = console.Device(s, "n", kname)
	})
}

// Event counts as kubectl shows them: the core count, the series count of an events.k8s.io event (whose
// core count is 0), and 1 for an event that has neither.
func TestEvents_CountAsKubectlDoes(t *testing.T) {
	node := &lvmv2.LVMNode{ObjectMeta: metav1.ObjectMeta{Name: "n", Namespace: "lvms"}}
	ev := func(name string, count int32, series *corev1.EventSeries) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "lvms"}, Reason: name, Count: count, Series: series,
			InvolvedObject: corev1.ObjectReference{APIVersion: "lvm.topolvm.io/v2alpha1", Kind: "LVMNode", Name: "n", Namespace: "lvms"}}
	}
	s := console.FromObjects([]client.Object{node,
		ev("core", 4, nil), ev("series", 0, &corev1.EventSeries{Count: 7}), ev("once", 0, nil)}, consoletest.At)
	got := map[string]int32{}
	for _, e := range console.Events(s) {
		got[e.Reason] = e.Count
	}
	if want := map[string]int32{"core": 4, "series": 7, "once": 1}; !maps.Equal(got, want) {
		t.Errorf("event counts %v, want %v", got, want)
	}
}

// A v1 device class is the default when it says so or is its cluster's only one, as the StorageClass the
// operator makes for it (kubectl shows lvms-vg1 (default)); a v2 class only when it says so.
func TestDeviceClasses_DefaultAsTheOperatorMakesIt(t *testing.T) {
	one := &lvmv1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: "one", Namespace: "lvms"}}
	one.Spec.Storage.DeviceClasses = []lvmv1.DeviceClass{{Name: "vg1"}}
	two := &lvmv1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: "two", Namespace: "lvms"}}
	two.Spec.Storage.DeviceClasses = []lvmv1.DeviceClass{{Name: "a"}, {Name: "b", Default: true}}
	set := &lvmv2.LVMNodeSet{ObjectMeta: metav1.ObjectMeta{Name: "set", Namespace: "lvms"}}
	set.Spec.Template.DeviceClasses = []lvmv2.DeviceClass{{Name: "only", Strategy: lvmv2.StrategyThick, VolumeGroup: "vg"}}
	got := map[string]bool{}
	for _, dc := range console.DeviceClasses(console.FromObjects([]client.Object{one, two, set}, consoletest.At)) {
		got[dc.Source.Name+"/"+dc.Name] = dc.Default
	}
	if want := map[string]bool{"one/vg1": true, "two/a": false, "two/b": true, "set/only": false}; !maps.Equal(got, want) {
		t.Errorf("defaults %v, want %v", got, want)
	}
}

// When the console cannot read VolumeSnapshotClasses (the snapshot API is not served) and no agent
// reported the class, whether it exists cannot be known: the class says so and does not claim it exists or
// is missing. A class an agent reported goes by the report.
func TestDeviceClasses_SnapshotClassCannotBeKnownWithoutTheAPI(t *testing.T) {
	set := &lvmv2.LVMNodeSet{ObjectMeta: metav1.ObjectMeta{Name: "set", Namespace: "lvms"}}
	set.Spec.Template.DeviceClasses = []lvmv2.DeviceClass{{Name: "fast", Strategy: lvmv2.StrategyThin, VolumeGroup: "vg",
		Thin: &lvmv2.ThinConfig{PoolName: "pool", SizePercent: 90, OverprovisionRatio: 10}}}
	s := console.FromObjects([]client.Object{set}, consoletest.At)
	const why = "the cluster does not serve snapshot.storage.k8s.io/v1"
	s.Hidden = append(s.Hidden, console.HiddenKind{Resource: "volumesnapshotclasses.snapshot.storage.k8s.io", Reason: why})
	dcs := console.DeviceClasses(s)
	if len(dcs) != 1 || dcs[0].SnapshotClass == nil {
		t.Fatalf("device classes %+v, want fast with its snapshot class", dcs)
	}
	if c := dcs[0].SnapshotClass; c.Unknown != why || c.InCluster || c.Differs {
		t.Errorf("snapshot class %+v, want it unknown (%q), neither in the cluster nor differing", c, why)
	}
}

// A node with an LVMNode and a v1 LVMVolumeGroupNodeStatus: the v1 object's "nothing is desired here" is
// not shown as the node's health beside the LVMNode's condition of the same type, and every condition says
// which object carries it.
func TestNode_ConditionsSayTheirObjectAndV1NothingDesiredIsDropped(t *testing.T) {
	cond := func(typ string, st metav1.ConditionStatus, reason, msg string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg}
	}
	n := &lvmv2.LVMNode{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "lvms"}}
	n.Status.State = lvmv2.StateDegraded
	n.Status.Conditions = []metav1.Condition{cond(lvmv2.ConditionVolumeGroupsHealthy, metav1.ConditionFalse, "Degraded", "vg1 is Degraded")}
	ns := &lvmv1.LVMVolumeGroupNodeStatus{ObjectMeta: metav1.ObjectMeta{Name: "n1", Namespace: "lvms"}}
	ns.Status.Conditions = []metav1.Condition{
		cond(lvmv2.ConditionVolumeGroupsHealthy, metav1.ConditionTrue, lvmv2.ReasonNoVolumeGroups, "no volume group is desired on this node"),
		cond(lvmv2.ConditionLVMDConfigured, metav1.ConditionFalse, "WriteFailed", "lvmd.yaml: read-only file system")}
	v, err := console.Node(console.FromObjects([]client.Object{n, ns}, consoletest.At), "n1")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range v.Conditions {
		if c.Object == nil {
			t.Fatalf("condition %s says no object", c.Type)
		}
		got[c.Type+"/"+c.Status] = c.Object.Kind
	}
	want := map[string]string{"VolumeGroupsHealthy/False": "LVMNode", "LVMDConfigured/False": "LVMVolumeGroupNodeStatus"}
	if !maps.Equal(got, want) {
		t.Errorf("conditions %v, want %v (no v1 VolumeGroupsHealthy True beside the LVMNode's False)", got, want)
	}
}
