package plan

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/operator/names"
)

// maxObjectName is the longest object name (a DNS-1123 subdomain).
const maxObjectName = 253

// group puts the converted device classes into LVMNodeSets: one per distinct node selector (the
// LVMCluster's tolerations apply to every class, so they are the same for all), split when a set would hold
// more volume groups than v2 allows. Sets are sorted by name, mappings by device class.
func group(c *lvmv1.LVMCluster, convs []converted, fs *findings) ([]lvmv2.LVMNodeSet, []Mapping) {
	byKey := map[string][]converted{}
	var keys []string
	for _, cv := range convs {
		if _, ok := byKey[cv.key]; !ok {
			keys = append(keys, cv.key)
		}
		byKey[cv.key] = append(byKey[cv.key], cv)
	}
	var groups [][]converted
	for _, k := range keys {
		g := byKey[k]
		slices.SortFunc(g, func(a, b converted) int { return cmp.Compare(a.dc.Name, b.dc.Name) })
		for chunk := range slices.Chunk(g, maxVolumeGroups) {
			groups = append(groups, chunk)
		}
	}
	var sets []lvmv2.LVMNodeSet
	var mappings []Mapping
	for _, g := range groups {
		name := c.Name
		if len(groups) > 1 {
			name = setName(c.Name, g[0].dc.Name)
		}
		set := lvmv2.LVMNodeSet{
			TypeMeta: metav1.TypeMeta{APIVersion: lvmv2.GroupVersion.String(), Kind: names.KindNodeSet},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace,
				Annotations: map[string]string{names.MigratedFromAnnotation: c.Name}},
			Spec: lvmv2.LVMNodeSetSpec{
				NodeSelector: g[0].selector.DeepCopy(),
				Provider:     lvmv2.Provider{Strategy: lvmv2.ProviderManagedTopoLVM},
			},
		}
		for _, t := range c.Spec.Tolerations {
			set.Spec.Tolerations = append(set.Spec.Tolerations, *t.DeepCopy())
		}
		for _, cv := range g {
			set.Spec.Template.VolumeGroups = append(set.Spec.Template.VolumeGroups, *cv.vg.DeepCopy())
			set.Spec.Template.DeviceClasses = append(set.Spec.Template.DeviceClasses, *cv.dc.DeepCopy())
			mappings = append(mappings, mapping(name, cv))
		}
		sets = append(sets, set)
	}
	slices.SortFunc(sets, func(a, b lvmv2.LVMNodeSet) int { return cmp.Compare(a.Name, b.Name) })
	slices.SortFunc(mappings, func(a, b Mapping) int { return cmp.Compare(a.DeviceClass, b.DeviceClass) })
	for _, k := range keys {
		if g := byKey[k]; len(g) > maxVolumeGroups {
			var split []string
			for _, m := range mappings {
				if slices.ContainsFunc(g, func(cv converted) bool { return cv.dc.Name == m.DeviceClass }) && !slices.Contains(split, m.NodeSet) {
					split = append(split, m.NodeSet)
				}
			}
			fs.add(Note, CodeNodeSetSplit, -1, "", "spec.storage.deviceClasses",
				"%d device classes share one node selector, and an LVMNodeSet holds at most %d volume groups, so they are split into the sets %s. The sets select the same nodes, which is allowed because their volume groups, devices and device classes differ.",
				len(g), maxVolumeGroups, strings.Join(split, ", "))
		}
	}
	return sets, mappings
}

func mapping(set string, cv converted) Mapping {
	m := Mapping{DeviceClass: cv.dc.Name, NodeSet: set, VolumeGroup: cv.vg.Name, Strategy: cv.dc.Strategy,
		FSType: string(cv.dc.FilesystemType), Shared: cv.vg.AccessPolicy == lvmv2.AccessPolicyShared,
		Default: cv.dc.Default, StorageClass: cv.dc.StorageClass.Name, index: cv.index}
	if cv.dc.Thin != nil {
		m.ThinPool = cv.dc.Thin.PoolName
	}
	if cv.dc.SnapshotClass != nil {
		m.SnapshotClass = cv.dc.SnapshotClass.Name
	}
	return m
}

// setName is <cluster>-<device class>, cut and suffixed with a hash of the whole when too long.
func setName(cluster, class string) string {
	name := cluster + "-" + class
	if len(name) <= maxObjectName {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	h := hex.EncodeToString(sum[:])[:10]
	return strings.TrimRight(name[:maxObjectName-len(h)-1], ".-") + "-" + h
}

// canonicalNodeSelector returns sel with values, requirements and terms sorted and duplicate terms
// removed: the same selection, written one way, so equal selectors group together. Empty lists stay empty
// (not nil), because an empty selector selects no node while a nil one selects every node.
func canonicalNodeSelector(sel *corev1.NodeSelector) *corev1.NodeSelector {
	if sel == nil {
		return nil
	}
	out := sel.DeepCopy()
	if out.NodeSelectorTerms == nil {
		out.NodeSelectorTerms = []corev1.NodeSelectorTerm{}
	}
	for i := range out.NodeSelectorTerms {
		sortRequirements(out.NodeSelectorTerms[i].MatchExpressions)
		sortRequirements(out.NodeSelectorTerms[i].MatchFields)
	}
	slices.SortFunc(out.NodeSelectorTerms, func(a, b corev1.NodeSelectorTerm) int { return cmp.Compare(mustJSON(a), mustJSON(b)) })
	out.NodeSelectorTerms = slices.CompactFunc(out.NodeSelectorTerms, func(a, b corev1.NodeSelectorTerm) bool {
		return equality.Semantic.DeepEqual(a, b)
	})
	return out
}

func sortRequirements(rs []corev1.NodeSelectorRequirement) {
	for i := range rs {
		slices.Sort(rs[i].Values)
	}
	slices.SortFunc(rs, func(a, b corev1.NodeSelectorRequirement) int {
		return cmp.Or(cmp.Compare(a.Key, b.Key), cmp.Compare(a.Operator, b.Operator),
			cmp.Compare(strings.Join(a.Values, "\x00"), strings.Join(b.Values, "\x00")))
	})
}

// selectorKey identifies a canonical selector: "" for nil (every node).
func selectorKey(sel *corev1.NodeSelector) string {
	if sel == nil {
		return ""
	}
	return mustJSON(sel)
}

// selectsNoNode reports whether sel is set but has no term with a requirement: it matches no node.
func selectsNoNode(sel *corev1.NodeSelector) bool {
	if sel == nil {
		return false
	}
	for _, t := range sel.NodeSelectorTerms {
		if len(t.MatchExpressions) > 0 || len(t.MatchFields) > 0 {
			return false
		}
	}
	return true
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only plain API structs are marshalled here; they always encode.
		panic(fmt.Sprintf("encode %T: %v", v, err))
	}
	return string(b)
}
