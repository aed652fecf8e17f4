package desired

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

func loadSample(t *testing.T, name string, into any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "samples", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		t.Fatal(err)
	}
}

func TestFromLVMNode_Sample(t *testing.T) {
	var n lvmv2.LVMNode
	loadSample(t, "lvm_v2alpha1_lvmnode.yaml", &n)
	n.Generation = 3
	d := FromLVMNode(&n)
	if d.Generation != 3 || d.SocketName != "/run/topolvm/lvmd.sock" || d.External {
		t.Errorf("node = %+v", d)
	}
	var names []string
	for _, vg := range d.VolumeGroups {
		names = append(names, vg.Name)
		if vg.Selector == nil || vg.SelectorError != "" || vg.Source != SourceLVMNode || vg.Object != n.Name {
			t.Errorf("volume group %s = %+v", vg.Name, vg)
		}
	}
	if strings.Join(names, ",") != "vg1,othervg" {
		t.Errorf("volume groups = %v, want spec order", names)
	}
	vg1, _ := d.VolumeGroup("vg1")
	wantPool := ThinPool{Name: "thin-pool-1", SizePercent: 90, OverprovisionRatio: 10, AutoextendThreshold: 80, AutoextendPercent: 20, DataUsageThreshold: 90, MetadataUsageThreshold: 75}
	if !reflect.DeepEqual(vg1.ThinPools, []ThinPool{wantPool}) {
		t.Errorf("vg1 pools = %+v", vg1.ThinPools)
	}
	if len(d.DeviceClasses) != 1 || d.DeviceClasses[0].Thin == nil || *d.DeviceClasses[0].Thin != wantPool || !d.DeviceClasses[0].Default {
		t.Errorf("device classes = %+v", d.DeviceClasses)
	}
	if other, _ := d.VolumeGroup("othervg"); other.Selector.Explicit() {
		t.Error("othervg (Any) must not be explicit")
	}
}

func TestFromLVMNode_SelectorProblems(t *testing.T) {
	yes := true
	n := &lvmv2.LVMNode{ObjectMeta: metav1.ObjectMeta{Name: "n", DeletionTimestamp: &metav1.Time{}}, Spec: lvmv2.LVMNodeSpec{
		VolumeGroups: []lvmv2.VolumeGroup{
			{Name: "bad", DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: "colour", Operator: "In", Values: []string{"x"}}}}}}},
			{Name: "wipe", ForceWipeDevicesAndDestroyAllData: &yes, DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{{MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: "type", Operator: "In", Values: []string{"disk"}}}}}}},
		},
		DeviceClasses: []lvmv2.DeviceClass{{Name: "thick", Strategy: lvmv2.StrategyThick, VolumeGroup: "bad"}},
	}}
	d := FromLVMNode(n)
	if want := `the device selector of volume group bad cannot be used: deviceSelectorTerms[0].matchExpressions[0]: unknown key "colour"`; !strings.HasPrefix(d.VolumeGroups[0].SelectorError, want) || d.VolumeGroups[0].Selector != nil {
		t.Errorf("bad = %q", d.VolumeGroups[0].SelectorError)
	}
	if !strings.Contains(d.VolumeGroups[1].SelectorError, "LVMS never wipes devices it found by pattern") {
		t.Errorf("wipe = %q", d.VolumeGroups[1].SelectorError)
	}
	if !d.VolumeGroups[0].Deleting || d.DeviceClasses[0].SpareGB == nil || *d.DeviceClasses[0].SpareGB != 0 {
		t.Errorf("deleting node / thick spare: %+v %+v", d.VolumeGroups[0], d.DeviceClasses[0])
	}
}

func TestFromV1(t *testing.T) {
	var sample lvmv1.LVMVolumeGroup
	loadSample(t, "lvm_v1alpha1_lvmvolumegroup.yaml", &sample)
	static := lvmv1.DeviceDiscoveryPolicyStatic
	two := 2
	other := lvmv1.LVMVolumeGroup{ObjectMeta: metav1.ObjectMeta{Name: "a-raid"}, Spec: lvmv1.LVMVolumeGroupSpec{
		DeviceDiscoveryPolicy: &static,
		RAIDConfig:            &lvmv1.RAIDConfig{Type: "raid1", Mirrors: &two},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "storage", Operator: corev1.NodeSelectorOpIn, Values: []string{"yes"}}}}}},
	}}
	elsewhere := *other.DeepCopy()
	elsewhere.Name = "elsewhere"
	elsewhere.Spec.NodeSelector.NodeSelectorTerms[0].MatchExpressions[0].Values = []string{"no"}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-0", Labels: map[string]string{"storage": "yes"}}}
	d := FromV1(V1Inputs{Node: node, VolumeGroups: []lvmv1.LVMVolumeGroup{sample, other, elsewhere}})
	var names []string
	for _, vg := range d.VolumeGroups {
		names = append(names, vg.Name)
	}
	if strings.Join(names, ",") != "a-raid,vg1" {
		t.Errorf("volume groups = %v, want a-raid and vg1 by name (elsewhere does not match the node)", names)
	}
	raid, _ := d.VolumeGroup("a-raid")
	if raid.DiscoveryPolicy != lvmv1.DeviceDiscoveryPolicyRuntimeStatic || !raid.StaticDiscovery || !raid.Selector.IsAll() {
		t.Errorf("raid = %+v", raid)
	}
	vg1, _ := d.VolumeGroup("vg1")
	if vg1.DiscoveryPolicy != lvmv1.DeviceDiscoveryPolicyPreconfigured || vg1.ForceWipe {
		t.Errorf("vg1 = %+v", vg1)
	}
	want := ThinPool{Name: "thin-pool-1", SizePercent: 90, OverprovisionRatio: 10, ChunkSize: 128 << 10, AutoextendThreshold: 80, AutoextendPercent: 20, DataUsageThreshold: 90, MetadataUsageThreshold: 75}
	if !reflect.DeepEqual(vg1.ThinPools, []ThinPool{want}) {
		t.Errorf("vg1 pools = %+v, want %+v", vg1.ThinPools, want)
	}
	if got := strings.Join(d.DeviceClasses[0].LVCreateOptions, " "); got != "--type=raid1 --mirrors=2" {
		t.Errorf("raid options = %q", got)
	}
}

func TestFromV1_ExternalAndStaticMetadata(t *testing.T) {
	meta := resource.MustParse("2Gi")
	vg := lvmv1.LVMVolumeGroup{ObjectMeta: metav1.ObjectMeta{Name: "thin"}, Spec: lvmv1.LVMVolumeGroupSpec{ThinPoolConfig: &lvmv1.ThinPoolConfig{
		Name: "p", OverprovisionRatio: 5, ChunkSizeCalculationPolicy: lvmv1.ChunkSizeCalculationPolicyHost,
		MetadataSizeCalculationPolicy: lvmv1.MetadataSizePolicyStatic, MetadataSize: &meta}}}
	d := FromV1(V1Inputs{Node: &corev1.Node{}, VolumeGroups: []lvmv1.LVMVolumeGroup{vg},
		Clusters: []lvmv1.LVMCluster{{Spec: lvmv1.LVMClusterSpec{ConfigurationPolicy: lvmv1.ConfigurationPolicyExternal}}}})
	if !d.External {
		t.Error("ExternalConfiguration not seen")
	}
	want := ThinPool{Name: "p", SizePercent: 90, OverprovisionRatio: 5, MetadataSize: 2 << 30, AutoextendThreshold: 80, AutoextendPercent: 20, DataUsageThreshold: 90, MetadataUsageThreshold: 75}
	if *d.DeviceClasses[0].Thin != want {
		t.Errorf("pool = %+v, want %+v", *d.DeviceClasses[0].Thin, want)
	}
}

func TestMerge(t *testing.T) {
	v2 := &Node{Generation: 2, VolumeGroups: []VolumeGroup{{Name: "vg1", Source: SourceLVMNode}}, DeviceClasses: []DeviceClass{{Name: "vg1", Source: SourceLVMNode}}}
	v1 := &Node{External: true, VolumeGroups: []VolumeGroup{{Name: "vg1", Source: SourceLVMVolumeGroup}, {Name: "vg2", Source: SourceLVMVolumeGroup}},
		DeviceClasses: []DeviceClass{{Name: "vg1", Source: SourceLVMVolumeGroup}, {Name: "vg2", Source: SourceLVMVolumeGroup}}}
	m := Merge(v2, v1)
	if len(m.VolumeGroups) != 2 || m.VolumeGroups[0].Source != SourceLVMNode || m.VolumeGroups[1].Name != "vg2" || !m.External || m.Generation != 2 || len(m.DeviceClasses) != 2 {
		t.Errorf("merged = %+v", m)
	}
	if Merge(nil, v1) != v1 || Merge(v2, nil) != v2 {
		t.Error("merge with one side missing must return the other")
	}
}

func TestMatchesNode(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a", "disks": "4"}}}
	term := func(rs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: rs}
	}
	r := func(k string, op corev1.NodeSelectorOperator, v ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: k, Operator: op, Values: v}
	}
	tests := []struct {
		name string
		sel  *corev1.NodeSelector
		want bool
	}{
		{"nil selects every node", nil, true},
		{"In", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term(r("zone", corev1.NodeSelectorOpIn, "a", "b"))}}, true},
		{"NotIn", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term(r("zone", corev1.NodeSelectorOpNotIn, "a"))}}, false},
		{"ANDed", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term(r("zone", corev1.NodeSelectorOpIn, "a"), r("x", corev1.NodeSelectorOpExists))}}, false},
		{"ORed", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term(r("x", corev1.NodeSelectorOpExists)), term(r("x", corev1.NodeSelectorOpDoesNotExist))}}, true},
		{"Gt", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term(r("disks", corev1.NodeSelectorOpGt, "3"))}}, true},
		{"Lt", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term(r("disks", corev1.NodeSelectorOpLt, "3"))}}, false},
		{"metadata.name field", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{r("metadata.name", corev1.NodeSelectorOpIn, "n1")}}}}, true},
		{"empty term selects nothing", &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := MatchesNode(tc.sel, node); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
