package console

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

// The oracle: random clusters (sets and clusters with random selectors and tolerations over random node
// labels and taints, devices with random links named by random selectors, sizes) checked against a small
// implementation of the rules written here, independent of the console's and the operator's code:
//   - a node's owners are the sets and clusters whose selector matches its labels and whose tolerations cover
//     its NoSchedule/NoExecute taints;
//   - every device class is listed once, under the set or cluster that defines it;
//   - every disk a selector names is one row: on the device that has that name (kernel name or link), else
//     missing;
//   - a thick class's capacity is its volume group's size and free space (usable or not: see the second half).
func TestOracle_RandomClusters(t *testing.T) {
	for seed := uint64(1); seed <= 2000; seed++ {
		r := rand.New(rand.NewPCG(seed, 0x1b3))
		w := randomWorld(r)
		extend(r, w)
		if msg := w.check(); msg != "" {
			t.Fatalf("seed %d: %s", seed, msg)
		}
		if msg := w.checkMore(); msg != "" {
			t.Fatalf("seed %d: %s", seed, msg)
		}
	}
}

var (
	oracleKeys   = []string{"zone", "disk", "role"}
	oracleValues = []string{"a", "b", "c"}
	oracleTaints = []string{"dedicated", "gpu"}
)

type world struct {
	snap *Snapshot
	// named[node] are the links the node's volume group selector names; links[node][kname] the device links.
	named map[string][]string
	links map[string]map[string][]string
	ext   *extension // the second half's (oracle_more_test.go)
}

func randomWorld(r *rand.Rand) *world {
	const ns = "lvms"
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	w := &world{snap: &Snapshot{Installed: true}, named: map[string][]string{}, links: map[string]map[string][]string{}}
	selector := func() *corev1.NodeSelector {
		if r.IntN(5) == 0 {
			return nil // every node
		}
		var terms []corev1.NodeSelectorTerm
		for range 1 + r.IntN(2) {
			var exprs []corev1.NodeSelectorRequirement
			for range 1 + r.IntN(2) {
				e := corev1.NodeSelectorRequirement{Key: pick(oracleKeys)}
				switch r.IntN(4) {
				case 0:
					e.Operator, e.Values = corev1.NodeSelectorOpIn, []string{pick(oracleValues), pick(oracleValues)}
				case 1:
					e.Operator, e.Values = corev1.NodeSelectorOpNotIn, []string{pick(oracleValues)}
				case 2:
					e.Operator = corev1.NodeSelectorOpExists
				default:
					e.Operator = corev1.NodeSelectorOpDoesNotExist
				}
				exprs = append(exprs, e)
			}
			terms = append(terms, corev1.NodeSelectorTerm{MatchExpressions: exprs})
		}
		return &corev1.NodeSelector{NodeSelectorTerms: terms}
	}
	tolerations := func() []corev1.Toleration {
		var out []corev1.Toleration
		for _, k := range oracleTaints {
			if r.IntN(3) == 0 {
				out = append(out, corev1.Toleration{Key: k, Operator: corev1.TolerationOpExists})
			}
		}
		return out
	}
	nodes := 1 + r.IntN(5)
	for i := range nodes {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i), Labels: map[string]string{}}}
		for _, k := range oracleKeys {
			if r.IntN(3) > 0 {
				n.Labels[k] = pick(oracleValues)
			}
		}
		for _, k := range oracleTaints {
			if r.IntN(4) == 0 {
				n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: k, Effect: corev1.TaintEffectNoSchedule})
			}
		}
		w.snap.Nodes = append(w.snap.Nodes, n)
	}
	for i := range 1 + r.IntN(3) {
		set := lvmv2.LVMNodeSet{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("set-%d", i), Namespace: ns},
			Spec: lvmv2.LVMNodeSetSpec{NodeSelector: selector(), Tolerations: tolerations(), Template: lvmv2.LVMNodeSpec{
				DeviceClasses: []lvmv2.DeviceClass{{Name: fmt.Sprintf("class-%d", i), VolumeGroup: fmt.Sprintf("vg-%d", i), Strategy: lvmv2.StrategyThick}}}}}
		w.snap.LVMNodeSets = append(w.snap.LVMNodeSets, set)
	}
	if r.IntN(2) == 0 {
		w.snap.LVMClusters = append(w.snap.LVMClusters, lvmv1.LVMCluster{ObjectMeta: metav1.ObjectMeta{Name: "cluster", Namespace: ns},
			Spec: lvmv1.LVMClusterSpec{Tolerations: tolerations(), Storage: lvmv1.Storage{DeviceClasses: []lvmv1.DeviceClass{{Name: "legacy", NodeSelector: selector()}}}}})
	}
	// Every node has an LVMNode of the first set (as after a node left other sets), with one volume group of
	// random devices; the selector names some of their links and a link no device has.
	for i := range w.snap.Nodes {
		name := w.snap.Nodes[i].Name
		vg := "vg-0"
		w.links[name] = map[string][]string{}
		var named []string
		st := lvmv2.VolumeGroupStatus{Name: vg, State: lvmv2.StateHealthy,
			Size: resource.NewQuantity(int64(10+r.IntN(90))<<30, resource.BinarySI), Free: resource.NewQuantity(int64(r.IntN(10))<<30, resource.BinarySI)}
		for d := range 1 + r.IntN(4) {
			kname := fmt.Sprintf("/dev/sd%c", 'a'+d)
			link := fmt.Sprintf("/dev/disk/by-id/wwn-%s-%d", name, d)
			w.links[name][kname] = []string{link}
			if r.IntN(3) > 0 {
				named = append(named, link)
			}
			if r.IntN(2) == 0 {
				st.Devices.Included = append(st.Devices.Included, lvmv2.Device{KName: kname, Links: []string{link}})
			} else {
				st.Devices.Excluded = append(st.Devices.Excluded, lvmv2.ExcludedDevice{KName: kname, Links: []string{link},
					Reasons: []string{kname + " is read-only"}, ReasonCodes: []string{"ReadOnly"}})
			}
		}
		if r.IntN(2) == 0 {
			named = append(named, "/dev/disk/by-id/wwn-gone-"+name)
		}
		w.named[name] = named
		spec := lvmv2.LVMNodeSpec{DeviceClasses: []lvmv2.DeviceClass{{Name: "class-0", VolumeGroup: vg, Strategy: lvmv2.StrategyThick}}}
		if len(named) > 0 {
			spec.VolumeGroups = []lvmv2.VolumeGroup{{Name: vg, DeviceSelector: lvmv2.DeviceSelector{DeviceSelectorTerms: []lvmv2.DeviceSelectorTerm{
				{MatchExpressions: []lvmv2.DeviceSelectorRequirement{{Key: lvmv2.KeyPath, Operator: lvmv2.OpIn, Values: named}}}}}}}
		}
		w.snap.LVMNodes = append(w.snap.LVMNodes, lvmv2.LVMNode{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: []metav1.OwnerReference{
				{APIVersion: "lvm.topolvm.io/v2alpha1", Kind: "LVMNodeSet", Name: "set-0", Controller: ptr.To(true)}}},
			Spec: spec,
			Status: lvmv2.LVMNodeStatus{State: lvmv2.StateReady, VolumeGroups: []lvmv2.VolumeGroupStatus{st},
				DeviceClasses: []lvmv2.DeviceClassStatus{{Name: "class-0", VolumeGroup: vg, State: lvmv2.StateHealthy}}}})
	}
	return w
}

// oracleMatches is the node selector rule, written out: terms ORed, expressions ANDed, a nil selector
// matches every node.
func oracleMatches(sel *corev1.NodeSelector, labels map[string]string) bool {
	if sel == nil {
		return true
	}
	for _, term := range sel.NodeSelectorTerms {
		all := len(term.MatchExpressions) > 0
		for _, e := range term.MatchExpressions {
			v, has := labels[e.Key]
			ok := false
			switch e.Operator {
			case corev1.NodeSelectorOpIn:
				ok = has && slices.Contains(e.Values, v)
			case corev1.NodeSelectorOpNotIn:
				ok = !has || !slices.Contains(e.Values, v)
			case corev1.NodeSelectorOpExists:
				ok = has
			case corev1.NodeSelectorOpDoesNotExist:
				ok = !has
			}
			all = all && ok
		}
		if all {
			return true
		}
	}
	return false
}

func oracleTolerated(taints []corev1.Taint, tols []corev1.Toleration) bool {
	for _, t := range taints {
		if !slices.ContainsFunc(tols, func(tol corev1.Toleration) bool { return tol.Key == t.Key }) {
			return false
		}
	}
	return true
}

func (w *world) check() string {
	for _, n := range w.snap.Nodes {
		var want []string
		for _, s := range w.snap.LVMNodeSets {
			if oracleMatches(s.Spec.NodeSelector, n.Labels) && oracleTolerated(n.Spec.Taints, s.Spec.Tolerations) {
				want = append(want, "LVMNodeSet "+s.Name)
			}
		}
		for _, c := range w.snap.LVMClusters {
			if oracleMatches(c.Spec.Storage.DeviceClasses[0].NodeSelector, n.Labels) && oracleTolerated(n.Spec.Taints, c.Spec.Tolerations) {
				want = append(want, "LVMCluster "+c.Name)
			}
		}
		v, err := Node(w.snap, n.Name)
		if err != nil {
			return err.Error()
		}
		var got []string
		for _, o := range v.Owners {
			got = append(got, o.Kind+" "+o.Name)
		}
		if !slices.Equal(got, want) {
			return fmt.Sprintf("node %s (labels %v, taints %v): owners %v, want %v", n.Name, n.Labels, n.Spec.Taints, got, want)
		}
		// Named disks: one row each, on the device with that link, else missing.
		rows := map[string][]DeviceRow{}
		for _, g := range v.VolumeGroups {
			for _, r := range g.Devices {
				key := r.KName
				if r.Path != "" {
					key = r.Path
				}
				rows[key] = append(rows[key], r)
			}
		}
		for _, name := range w.named[n.Name] {
			rs := rows[name]
			if len(rs) != 1 {
				return fmt.Sprintf("node %s: named disk %s has %d rows: %+v", n.Name, name, len(rs), v.VolumeGroups)
			}
			var device string
			for kname, links := range w.links[n.Name] {
				if slices.Contains(links, name) {
					device = kname
				}
			}
			switch {
			case device != "" && rs[0].KName != device:
				return fmt.Sprintf("node %s: %s is on %s, the row says %s", n.Name, name, device, rs[0].KName)
			case device == "" && rs[0].State != DeviceMissing:
				return fmt.Sprintf("node %s: %s is on no device, the row says %s", n.Name, name, rs[0].State)
			}
		}
		// Capacity of the thick class: the volume group's size and free space.
		st := w.snap.LVMNodes[slices.IndexFunc(w.snap.LVMNodes, func(l lvmv2.LVMNode) bool { return l.Name == n.Name })].Status.VolumeGroups[0]
		ci := slices.IndexFunc(v.Capacity, func(c Capacity) bool { return c.DeviceClass == "class-0" })
		if ci < 0 || !v.Capacity[ci].Known || v.Capacity[ci].Size.Value != st.Size.Value() || v.Capacity[ci].Free.Value+v.Capacity[ci].Unusable.Value != st.Free.Value() {
			return fmt.Sprintf("node %s: capacity %+v, want size %s free %s", n.Name, v.Capacity, st.Size, st.Free)
		}
	}
	// Every class once, under the set or cluster that defines it.
	seen := map[string]bool{}
	for _, dc := range DeviceClasses(w.snap) {
		key := dc.Name
		if seen[key] {
			return "class " + key + " listed twice"
		}
		seen[key] = true
		want := ""
		for _, s := range w.snap.LVMNodeSets {
			if slices.ContainsFunc(s.Spec.Template.DeviceClasses, func(t lvmv2.DeviceClass) bool { return t.Name == dc.Name }) {
				want = "LVMNodeSet " + s.Name
			}
		}
		if strings.HasPrefix(dc.Name, "legacy") {
			want = "LVMCluster cluster"
		}
		if got := dc.Source.Kind + " " + dc.Source.Name; got != want {
			return fmt.Sprintf("class %s under %s, want %s", dc.Name, got, want)
		}
	}
	return ""
}
