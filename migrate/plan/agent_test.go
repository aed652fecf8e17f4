package plan_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/migrate/plan"
	"github.com/lvms-dev/lvms/nodeagent/desired"
	"github.com/lvms-dev/lvms/nodeagent/selector"
)

// TestPlan_NodeAgentSeesTheSameStorage feeds the LVMCluster (as the LVMVolumeGroups the operator makes of
// it) and the planned sets (as LVMNodes) to the node agent's own desired-state builders and compares what
// the agent would do: the same volume groups, devices, thin pools, device classes, defaults and
// filesystems. The only differences allowed are those a Lossy finding of that device class explains.
func TestPlan_NodeAgentSeesTheSameStorage(t *testing.T) {
	for _, tc := range cases {
		if tc.wantErr != "" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			p, err := build(t, tc.input)
			if err != nil {
				t.Fatal(err)
			}
			c := clusterOf(t, tc.input)
			v1 := desired.FromV1(desired.V1Inputs{Node: &corev1.Node{}, VolumeGroups: volumeGroups(c)})
			v2 := &desired.Node{}
			for i := range p.NodeSets {
				n := desired.FromLVMNode(&lvmv2.LVMNode{Spec: p.NodeSets[i].Spec.Template})
				v2.VolumeGroups = append(v2.VolumeGroups, n.VolumeGroups...)
				v2.DeviceClasses = append(v2.DeviceClasses, n.DeviceClasses...)
			}
			for _, want := range v1.VolumeGroups {
				got, ok := v2.VolumeGroup(want.Name)
				if !ok {
					t.Errorf("volume group %s is missing from the plan", want.Name)
					continue
				}
				explained := codesOf(p, want.Name)
				compare(t, "volume group "+want.Name, vgView(want, explained), vgView(*got, explained))
			}
			for _, want := range v1.DeviceClasses {
				i := slices.IndexFunc(v2.DeviceClasses, func(d desired.DeviceClass) bool { return d.Name == want.Name })
				if i < 0 {
					t.Errorf("device class %s is missing from the plan", want.Name)
					continue
				}
				explained := codesOf(p, want.Name)
				compare(t, "device class "+want.Name, dcView(want, explained), dcView(v2.DeviceClasses[i], explained))
			}
		})
	}
}

// volumeGroups are the LVMVolumeGroups the operator writes for c (operator/lvmcluster desiredVolumeGroup),
// without node selectors: node selection is compared through the sets' selectors by checkInvariants.
func volumeGroups(c *lvmv1.LVMCluster) []lvmv1.LVMVolumeGroup {
	var out []lvmv1.LVMVolumeGroup
	dcs := c.Spec.Storage.DeviceClasses
	for _, dc := range dcs {
		vg := lvmv1.LVMVolumeGroup{ObjectMeta: metav1.ObjectMeta{Name: dc.Name, Namespace: c.Namespace},
			Spec: lvmv1.LVMVolumeGroupSpec{DeviceSelector: dc.DeviceSelector.DeepCopy(), ThinPoolConfig: dc.ThinPoolConfig.DeepCopy(),
				RAIDConfig: dc.RAIDConfig.DeepCopy(), Default: dc.Default || len(dcs) == 1, DeviceDiscoveryPolicy: dc.DeviceDiscoveryPolicy,
				DeviceAccessPolicy: dc.DeviceAccessPolicy.Normalized(), FilesystemType: dc.FilesystemType}}
		if vg.Spec.FilesystemType == "" && vg.Spec.DeviceAccessPolicy != lvmv1.DeviceAccessPolicyShared {
			vg.Spec.FilesystemType = lvmv1.FilesystemXFS
		}
		out = append(out, vg)
	}
	return out
}

func codesOf(p *plan.Plan, class string) map[plan.Code]bool {
	out := map[plan.Code]bool{}
	for _, f := range p.Findings {
		if f.DeviceClass == class && f.Severity == plan.Lossy {
			out[f.Code] = true
		}
	}
	return out
}

// vgView is what the agent does with a volume group, minus what a finding explains.
func vgView(vg desired.VolumeGroup, explained map[plan.Code]bool) map[string]any {
	v := map[string]any{"shared": vg.Shared, "thinPools": vg.ThinPools, "selectorError": vg.SelectorError,
		"devices": namedPaths(vg.Selector), "explicit": vg.Selector != nil && vg.Selector.Explicit()}
	if !explained[plan.CodeForceWipeNotCarried] {
		v["forceWipe"] = vg.ForceWipe
	}
	if !explained[plan.CodeStaticDiscoveryNotSupported] && !explained[plan.CodeRAIDNotSupported] {
		v["staticDiscovery"] = vg.StaticDiscovery
	}
	return v
}

func namedPaths(s *selector.Selector) []string {
	if s == nil {
		return nil
	}
	var out []string
	for _, p := range s.NamedPaths() {
		out = append(out, p.Path)
	}
	return out
}

func dcView(dc desired.DeviceClass, explained map[plan.Code]bool) map[string]any {
	v := map[string]any{"volumeGroup": dc.VolumeGroup, "default": dc.Default, "thin": fmt.Sprintf("%+v", dc.Thin),
		"spareGB": fmt.Sprint(dc.SpareGB != nil && *dc.SpareGB == 0), "fstype": dc.FSType}
	if !explained[plan.CodeRAIDNotSupported] {
		v["lvcreateOptions"] = dc.LVCreateOptions
		v["needs"] = dc.Needs
	}
	return v
}

func compare(t *testing.T, what string, want, got map[string]any) {
	t.Helper()
	for k, w := range want {
		if !reflect.DeepEqual(w, got[k]) {
			t.Errorf("%s: the node agent would see %s %v after migration, %v before", what, k, got[k], w)
		}
	}
}
