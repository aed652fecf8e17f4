package status

import (
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/blockdev/blockdevtest"
	"github.com/lvms-dev/lvms/nodeagent/desired"
	"github.com/lvms-dev/lvms/nodeagent/filter"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/volumegroup"
)

var (
	t0 = metav1.NewTime(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	t1 = metav1.NewTime(t0.Add(time.Hour))
)

func thinCaps() lvm.Capabilities {
	return lvm.Capabilities{DeviceMapper: true, Targets: []string{"linear", "striped", "thin", "thin-pool"}}
}

// serverNode is the seed's LVMNode, adapted to the server fixture: vg1 names a missing device and the
// NVMe disk that holds vg1 (with thin-pool-1); othervg takes any device.
func serverNode(t *testing.T) *lvmv2.LVMNode {
	t.Helper()
	return &lvmv2.LVMNode{
		ObjectMeta: metav1.ObjectMeta{Name: "worker-0", Generation: 2},
		Spec: lvmv2.LVMNodeSpec{
			VolumeGroups: []lvmv2.VolumeGroup{
				{Name: "vg1", DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{
					{MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: "kname", Operator: "In", Values: []string{"/dev/mapper/some-encrypted-device", "/dev/nvme1n1"}}}}}}},
				{Name: "othervg", DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{
					{MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: "kname", Operator: "Any"}}}}}},
			},
			DeviceClasses: []lvmv2.DeviceClass{{Name: "thinly-provisioned", Strategy: lvmv2.StrategyThin, VolumeGroup: "vg1", Default: true,
				Thin: &lvmv2.ThinConfig{PoolName: "thin-pool-1", SizePercent: 90, OverprovisionRatio: 10}}},
		},
	}
}

// serverInputs filters the server fixture for the node and marks vg1 healthy with its pool and othervg
// as not created yet.
func serverInputs(t *testing.T, n *desired.Node, caps lvm.Capabilities) Inputs {
	t.Helper()
	inv, rep, _ := blockdevtest.Server(t)
	var fvgs []filter.VolumeGroup
	for _, vg := range n.VolumeGroups {
		fvgs = append(fvgs, filter.VolumeGroup{Name: vg.Name, Selector: vg.Selector})
	}
	fr := filter.Run(filter.Input{Inventory: inv, Report: rep, VolumeGroups: fvgs})
	pool, _ := rep.LV("vg1", "thin-pool-1")
	var out volumegroup.Outcome
	for i, vg := range n.VolumeGroups {
		r := volumegroup.Result{Name: vg.Name, Phase: volumegroup.PhaseProgressing, Filter: fr[i], Message: "volume group " + vg.Name + " changed; checking it again"}
		if vg.Name == "vg1" {
			r.Phase, r.Message, r.Pools = volumegroup.PhaseHealthy, "", []volumegroup.Pool{{Name: "thin-pool-1", LV: &pool, DataUsageThreshold: 85, MetadataUsageThreshold: 70}}
		}
		out.VolumeGroups = append(out.VolumeGroups, r)
	}
	return Inputs{Node: n, Outcome: out, Observation: volumegroup.Observation{Inventory: inv, Report: rep}, Capabilities: caps,
		LVMD: LVMD{OK: true, Reason: ReasonWritten, Message: "lvmd.yaml lists every device class"}, Now: t0}
}

func TestLVMNode_ServerFixture(t *testing.T) {
	n := desired.FromLVMNode(serverNode(t))
	st := LVMNode(lvmv2.LVMNodeStatus{}, serverInputs(t, n, thinCaps()))

	if st.ObservedGeneration != 2 || st.State != lvmv2.StateProgressing || st.Message != "volume group othervg changed; checking it again" {
		t.Errorf("node: generation %d, state %s, message %q", st.ObservedGeneration, st.State, st.Message)
	}
	vg1 := st.VolumeGroups[0]
	if vg1.Name != "vg1" || vg1.State != lvmv2.StateHealthy || vg1.Size.Value() != 1600319209472 || vg1.Message != "" {
		t.Errorf("vg1 = %s %s %s %q", vg1.Name, vg1.State, vg1.Size, vg1.Message)
	}
	if len(vg1.Devices.Included) != 1 || vg1.Devices.Included[0].KName != "/dev/nvme1n1" || vg1.Devices.Included[0].Size.Value() != 1600321314816 {
		t.Errorf("vg1 included = %+v", vg1.Devices.Included)
	}
	wantExcluded := []lvmv2.ExcludedDevice{{KName: "/dev/mapper/some-encrypted-device",
		Reasons: []string{"/dev/mapper/some-encrypted-device was not found on this node"}, ReasonCodes: []string{"NotFound"}}}
	if !reflect.DeepEqual(vg1.Devices.Excluded, wantExcluded) {
		t.Errorf("vg1 excluded = %+v", vg1.Devices.Excluded)
	}
	wantPool := lvmv2.LogicalVolumeStatus{Name: "thin-pool-1", DataPercent: "0.0", MetadataPercent: "30.0", Attributes: "twi-aotz--",
		DataUsageThreshold: 85, MetadataUsageThreshold: 70}
	gotPool := vg1.Volumes[0]
	gotPool.Size = nil
	if !reflect.DeepEqual(gotPool, wantPool) || vg1.Volumes[0].Size.Value() != 1440286244864 {
		t.Errorf("vg1 volumes = %+v", vg1.Volumes)
	}
	other := st.VolumeGroups[1]
	var usedBy string
	for _, e := range other.Devices.Excluded {
		if e.KName == "/dev/nvme1n1" {
			usedBy = e.Reasons[0]
			// An excluded device on the node carries its size, as an included one does (issue 41 point 8).
			if e.Size == nil || e.Size.Value() != 1600321314816 {
				t.Errorf("excluded /dev/nvme1n1 size = %v, want the disk's 1600321314816 bytes", e.Size)
			}
		}
	}
	if other.State != lvmv2.StateProgressing || usedBy != "/dev/nvme1n1 is already being used by vg1 and cannot be used by a wildcard (Any) volumeGroup" {
		t.Errorf("othervg = %s, nvme1n1 reason %q", other.State, usedBy)
	}
	wantClasses := []lvmv2.DeviceClassStatus{{Name: "thinly-provisioned", VolumeGroup: "vg1", State: lvmv2.StateHealthy}}
	if !reflect.DeepEqual(st.DeviceClasses, wantClasses) {
		t.Errorf("device classes = %+v", st.DeviceClasses)
	}
	var types []string
	for _, c := range st.Conditions {
		types = append(types, c.Type+"="+string(c.Status)+"/"+c.Reason)
		if c.ObservedGeneration != 2 || !c.LastTransitionTime.Equal(&t0) {
			t.Errorf("condition %s: generation %d, transition %v", c.Type, c.ObservedGeneration, c.LastTransitionTime)
		}
	}
	if want := "VolumeGroupsHealthy=False/Progressing DeviceClassesHealthy=True/AllHealthy LVMDConfigured=True/Written"; strings.Join(types, " ") != want {
		t.Errorf("conditions = %s", strings.Join(types, " "))
	}
}

func TestLVMNode_KeepsOperatorFieldsAndTransitionTimes(t *testing.T) {
	n := desired.FromLVMNode(serverNode(t))
	prev := lvmv2.LVMNodeStatus{
		DeviceClasses: []lvmv2.DeviceClassStatus{{Name: "thinly-provisioned", StorageClass: &lvmv2.ClassStatus{Name: "lvms-thinly-provisioned", State: lvmv2.StateExists}}},
		Conditions: []metav1.Condition{
			{Type: lvmv2.ConditionStorageClassesHealthy, Status: metav1.ConditionTrue, Reason: "AllExist", LastTransitionTime: t0},
			{Type: lvmv2.ConditionDeviceClassesHealthy, Status: metav1.ConditionTrue, Reason: ReasonAllHealthy, LastTransitionTime: t0},
			{Type: lvmv2.ConditionVolumeGroupsHealthy, Status: metav1.ConditionTrue, Reason: ReasonAllHealthy, LastTransitionTime: t0},
		},
	}
	in := serverInputs(t, n, lvm.Capabilities{Reason: "device-mapper is not available in this kernel (dmsetup targets: /dev/mapper/control: open failed: No such device)"})
	in.Now = t1
	st := LVMNode(prev, in)
	if sc := st.DeviceClasses[0].StorageClass; sc == nil || sc.Name != "lvms-thinly-provisioned" {
		t.Errorf("the operator's StorageClass state was dropped: %+v", st.DeviceClasses[0])
	}
	var order []string
	for _, c := range st.Conditions {
		order = append(order, c.Type)
	}
	if want := []string{"VolumeGroupsHealthy", "DeviceClassesHealthy", "StorageClassesHealthy", "LVMDConfigured"}; !reflect.DeepEqual(order, want) {
		t.Errorf("order = %v", order)
	}
	dc, _ := FindCondition(st.Conditions, lvmv2.ConditionDeviceClassesHealthy)
	if dc.Status != metav1.ConditionFalse || dc.Reason != ReasonKernelTargetMissing || !dc.LastTransitionTime.Equal(&t1) ||
		dc.Message != "device class thinly-provisioned cannot provision volumes: device-mapper is not available in this kernel (dmsetup targets: /dev/mapper/control: open failed: No such device)" {
		t.Errorf("device classes condition = %+v", dc)
	}
	sc, _ := FindCondition(st.Conditions, lvmv2.ConditionStorageClassesHealthy)
	if !sc.LastTransitionTime.Equal(&t0) {
		t.Errorf("the operator's condition changed: %+v", sc)
	}
	if st.DeviceClasses[0].State != lvmv2.StateDegraded {
		t.Errorf("class state = %s", st.DeviceClasses[0].State)
	}
}

func TestSetCondition(t *testing.T) {
	c := metav1.Condition{Type: lvmv2.ConditionLVMDConfigured, Status: metav1.ConditionTrue, Reason: ReasonWritten, Message: "a"}
	conds := SetCondition(nil, c, t0)
	c.Message = "b"
	conds = SetCondition(conds, c, t1)
	if !conds[0].LastTransitionTime.Equal(&t0) || conds[0].Message != "b" {
		t.Errorf("same status: %+v; want the message updated and the transition time kept", conds[0])
	}
	c.Status = metav1.ConditionFalse
	conds = SetCondition(conds, c, t1)
	if !conds[0].LastTransitionTime.Equal(&t1) {
		t.Errorf("status change: %+v; want the transition time moved", conds[0])
	}
}

func TestNodeStatus_V1Shape(t *testing.T) {
	ds := &lvmv1.DeviceSelector{Paths: []lvmv1.DevicePath{"/dev/nvme1n1", "/dev/disk/by-id/missing"}}
	n := desired.FromV1(desired.V1Inputs{VolumeGroups: []lvmv1.LVMVolumeGroup{
		{ObjectMeta: metav1.ObjectMeta{Name: "vg1"}, Spec: lvmv1.LVMVolumeGroupSpec{DeviceSelector: ds,
			ThinPoolConfig: &lvmv1.ThinPoolConfig{Name: "thin-pool-1", SizePercent: 90, OverprovisionRatio: 10, ChunkSizeCalculationPolicy: lvmv1.ChunkSizeCalculationPolicyHost}}},
	}})
	in := serverInputs(t, n, thinCaps())
	in.Outcome.VolumeGroups[0].Phase = volumegroup.PhaseDegraded
	in.Outcome.VolumeGroups[0].Message = "required device /dev/disk/by-id/missing was not found on this node; attach it or remove it from paths"
	spec, st := NodeStatus(nil, 5, in)
	want := []lvmv1.VGStatus{{
		Name: "vg1", Status: lvmv1.VGStatusDegraded, Reason: in.Outcome.VolumeGroups[0].Message,
		Devices: []string{"/dev/nvme1n1"}, DeviceDiscoveryPolicy: lvmv1.DeviceDiscoveryPolicyPreconfigured,
	}}
	got := spec.LVMVGStatus
	if len(got) != 1 {
		t.Fatalf("nodeStatus = %+v", got)
	}
	excluded := got[0].Excluded
	got[0].Excluded = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("nodeStatus = %+v\nwant %+v", got, want)
	}
	if len(excluded) != 1 || excluded[0].Name != "/dev/disk/by-id/missing" || excluded[0].ReasonCodes[0] != "NotFound" {
		t.Errorf("excluded = %+v", excluded)
	}
	if st.ObservedGeneration != 5 || len(st.Conditions) != 3 || st.Conditions[0].Reason != ReasonDegraded {
		t.Errorf("status = %+v", st)
	}
}

func TestNodeStatus_External(t *testing.T) {
	inv, rep, _ := blockdevtest.Server(t)
	cfg := &lvmd.Config{DeviceClasses: []lvmd.DeviceClass{{Name: "ssd", VolumeGroup: "vg1"}, {Name: "hdd", VolumeGroup: "vg9"}}}
	in := Inputs{Node: &desired.Node{External: true}, Observation: volumegroup.Observation{Inventory: inv, Report: rep},
		External: &External{Config: cfg, Problems: cfg.CheckLVM(rep)}, LVMD: LVMD{OK: false, Reason: ReasonInvalid, Message: "device class hdd uses volume group vg9, which does not exist on this node"}, Now: t0}
	spec, st := NodeStatus(nil, 1, in)
	if len(spec.LVMVGStatus) != 2 || spec.LVMVGStatus[0].Name != "vg1" || spec.LVMVGStatus[0].Status != lvmv1.VGStatusReady ||
		spec.LVMVGStatus[1].Status != lvmv1.VGStatusFailed || !strings.Contains(spec.LVMVGStatus[1].Reason, "vg9 named by the host lvmd.yaml does not exist") {
		t.Errorf("nodeStatus = %+v", spec.LVMVGStatus)
	}
	vgc, _ := FindCondition(st.Conditions, lvmv2.ConditionVolumeGroupsHealthy)
	dcc, _ := FindCondition(st.Conditions, lvmv2.ConditionDeviceClassesHealthy)
	if vgc.Reason != ReasonExternalConfiguration || dcc.Status != metav1.ConditionFalse || dcc.Message != "device class hdd uses volume group vg9, which does not exist on this node" {
		t.Errorf("conditions = %+v", st.Conditions)
	}
}

// A healthy v1 volume group whose device class cannot provision is not Ready: the entry the LVMCluster
// and the console read says what the DeviceClassesHealthy condition says.
func TestNodeStatus_V1ClassThatCannotProvision_IsNotReady(t *testing.T) {
	ds := &lvmv1.DeviceSelector{Paths: []lvmv1.DevicePath{"/dev/nvme1n1"}}
	n := desired.FromV1(desired.V1Inputs{VolumeGroups: []lvmv1.LVMVolumeGroup{
		{ObjectMeta: metav1.ObjectMeta{Name: "vg1"}, Spec: lvmv1.LVMVolumeGroupSpec{DeviceSelector: ds,
			ThinPoolConfig: &lvmv1.ThinPoolConfig{Name: "thin-pool-1", SizePercent: 90, OverprovisionRatio: 10, ChunkSizeCalculationPolicy: lvmv1.ChunkSizeCalculationPolicyHost}}},
	}})
	for _, tc := range []struct {
		name   string
		caps   lvm.Capabilities
		status lvmv1.VGStatusType
		reason string
	}{
		{"thin targets present", thinCaps(), lvmv1.VGStatusReady, ""},
		{"no thin target", lvm.Capabilities{DeviceMapper: true, Targets: []string{"linear", "striped"}}, lvmv1.VGStatusDegraded,
			"device class vg1 cannot provision volumes: the kernel does not provide the device-mapper thin-pool, thin target (load dm-thin-pool)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, st := NodeStatus(nil, 1, serverInputs(t, n, tc.caps))
			if len(spec.LVMVGStatus) != 1 {
				t.Fatalf("nodeStatus = %+v", spec.LVMVGStatus)
			}
			got := spec.LVMVGStatus[0]
			if got.Status != tc.status || got.Reason != tc.reason {
				t.Errorf("vg1 = %s %q, want %s %q", got.Status, got.Reason, tc.status, tc.reason)
			}
			dcc, _ := FindCondition(st.Conditions, lvmv2.ConditionDeviceClassesHealthy)
			if (dcc.Status == metav1.ConditionTrue) != (tc.status == lvmv1.VGStatusReady) {
				t.Errorf("DeviceClassesHealthy %s %q contradicts vg1 %s", dcc.Status, dcc.Message, got.Status)
			}
		})
	}
}
