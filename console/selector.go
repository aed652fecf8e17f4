package console

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
)

// desiredFromV2 reads a v2alpha1 volume group and the thin pools of the device classes on it.
func desiredFromV2(vg lvmv2.VolumeGroup, classes []lvmv2.DeviceClass) *desiredVG {
	d := &desiredVG{name: vg.Name, accessPolicy: string(vg.AccessPolicy), exhaustive: len(vg.DeviceSelector.DeviceSelectorTerms) > 0,
		forceWipe: vg.ForceWipeDevicesAndDestroyAllData != nil && *vg.ForceWipeDevicesAndDestroyAllData}
	if d.accessPolicy == "" {
		d.accessPolicy = string(lvmv2.AccessPolicyNodeLocal)
	}
	var terms []string
	for _, t := range vg.DeviceSelector.DeviceSelectorTerms {
		var exprs []string
		names := false
		for _, e := range t.MatchExpressions {
			exprs = append(exprs, requirementText(string(e.Key), string(e.Operator), e.Values))
			if (e.Key == lvmv2.KeyPath || e.Key == lvmv2.KeyKName) && e.Operator == lvmv2.OpIn {
				names = true
				for _, v := range e.Values {
					if !slices.ContainsFunc(d.named, func(n namedDevice) bool { return n.path == v }) {
						d.named = append(d.named, namedDevice{path: v})
					}
				}
			}
		}
		if !names {
			d.exhaustive = false
		}
		terms = append(terms, strings.Join(exprs, " AND "))
	}
	d.selector = joinTerms(terms)
	for _, c := range classes {
		if c.VolumeGroup == vg.Name && c.Strategy == lvmv2.StrategyThin && c.Thin != nil {
			d.pools = append(d.pools, c.Thin.PoolName)
		}
	}
	return d
}

// desiredFromV1 reads a v1alpha1 device class (its volume group has the class's name).
func desiredFromV1(dc lvmv1.DeviceClass) *desiredVG {
	d := &desiredVG{name: dc.Name, kernelNamesOnly: true, accessPolicy: string(dc.DeviceAccessPolicy.Normalized())}
	if dc.ThinPoolConfig != nil {
		d.pools = []string{dc.ThinPoolConfig.Name}
	}
	sel := dc.DeviceSelector
	if sel == nil || (len(sel.Paths) == 0 && len(sel.OptionalPaths) == 0) {
		d.selector = "every available device"
		return d
	}
	d.exhaustive = true
	d.forceWipe = sel.ForceWipeDevicesAndDestroyAllData != nil && *sel.ForceWipeDevicesAndDestroyAllData
	var parts []string
	if len(sel.Paths) > 0 {
		ps := make([]string, len(sel.Paths))
		for i, p := range sel.Paths {
			ps[i] = string(p)
			d.named = append(d.named, namedDevice{path: string(p)})
		}
		parts = append(parts, "paths ["+strings.Join(ps, ", ")+"]")
	}
	if len(sel.OptionalPaths) > 0 {
		ps := make([]string, len(sel.OptionalPaths))
		for i, p := range sel.OptionalPaths {
			ps[i] = string(p)
			d.named = append(d.named, namedDevice{path: string(p), optional: true})
		}
		parts = append(parts, "optionalPaths ["+strings.Join(ps, ", ")+"]")
	}
	d.selector = strings.Join(parts, ", ")
	return d
}

func requirementText(key, op string, values []string) string {
	switch op {
	case "Any":
		return "any device"
	case "Exists", "DoesNotExist":
		return key + " " + op
	}
	return fmt.Sprintf("%s %s [%s]", key, op, strings.Join(values, ", "))
}

func joinTerms(terms []string) string {
	if len(terms) == 1 {
		return terms[0]
	}
	for i, t := range terms {
		if strings.Contains(t, " AND ") {
			terms[i] = "(" + t + ")"
		}
	}
	return strings.Join(terms, " OR ")
}

// FormatBytes prints a size in binary units with one decimal ("1.5 GiB", "512 MiB", "0 B").
func FormatBytes(n int64) string {
	const unit = 1024
	if n < 0 {
		return "-" + FormatBytes(-n)
	}
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	f := float64(n)
	i := -1
	for f >= unit && i < len(units)-1 {
		f /= unit
		i++
	}
	s := strconv.FormatFloat(f, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	return s + " " + units[i]
}

func bytesOf(q *resource.Quantity) *Bytes {
	if q == nil {
		return nil
	}
	b := mkBytes(q.Value())
	return &b
}

func mkBytes(n int64) Bytes { return Bytes{Value: n, Human: FormatBytes(n)} }
