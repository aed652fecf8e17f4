package selector

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/nodeagent/blockdev"
)

// Selector picks the devices of one volume group. Build it with All, FromV1 or FromV2.
type Selector struct {
	all      bool
	paths    []string
	optional []string
	terms    []term
}

type term struct {
	exprs []expr
}

type expr struct {
	key    lvmv2.DeviceSelectorKey
	op     lvmv2.DeviceSelectorOperator
	values []string
	sizes  []resource.Quantity // key size
}

// All selects every device (a v1 device class without deviceSelector).
func All() *Selector { return &Selector{all: true} }

// FromV1 builds a selector from a v1alpha1 deviceSelector; nil selects every device.
func FromV1(ds *lvmv1.DeviceSelector) *Selector {
	if ds == nil || (len(ds.Paths) == 0 && len(ds.OptionalPaths) == 0) {
		return All()
	}
	s := &Selector{}
	for _, p := range ds.Paths {
		s.paths = append(s.paths, string(p))
	}
	for _, p := range ds.OptionalPaths {
		s.optional = append(s.optional, string(p))
	}
	return s
}

var keys = []lvmv2.DeviceSelectorKey{lvmv2.KeyKName, lvmv2.KeyPath, lvmv2.KeySerial, lvmv2.KeyWWN, lvmv2.KeyModel,
	lvmv2.KeyVendor, lvmv2.KeyPartLabel, lvmv2.KeySize, lvmv2.KeyRotational, lvmv2.KeyType}

var operators = []lvmv2.DeviceSelectorOperator{lvmv2.OpIn, lvmv2.OpNotIn, lvmv2.OpExists, lvmv2.OpDoesNotExist,
	lvmv2.OpAny, lvmv2.OpGt, lvmv2.OpLt}

func join[T ~string](list []T) string {
	s := make([]string, len(list))
	for i, v := range list {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

// FromV2 builds a selector from a v2alpha1 deviceSelector. It refuses what the API server should have
// refused (an unknown key or operator, values an operator cannot take), naming the term and expression.
func FromV2(ds lvmv2.DeviceSelector) (*Selector, error) {
	if len(ds.DeviceSelectorTerms) == 0 {
		return nil, fmt.Errorf("deviceSelectorTerms is empty: add at least one term")
	}
	s := &Selector{}
	for ti, t := range ds.DeviceSelectorTerms {
		if len(t.MatchExpressions) == 0 {
			return nil, fmt.Errorf("deviceSelectorTerms[%d] has no matchExpressions: add at least one", ti)
		}
		var tm term
		for ei, e := range t.MatchExpressions {
			where := fmt.Sprintf("deviceSelectorTerms[%d].matchExpressions[%d]", ti, ei)
			ex, err := compileExpr(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			tm.exprs = append(tm.exprs, ex)
		}
		s.terms = append(s.terms, tm)
	}
	return s, nil
}

func compileExpr(e lvmv2.DeviceSelectorRequirement) (expr, error) {
	ex := expr{key: e.Key, op: e.Operator, values: slices.Clone(e.Values)}
	if !slices.Contains(keys, e.Key) {
		return ex, fmt.Errorf("unknown key %q: use one of %s", e.Key, join(keys))
	}
	if !slices.Contains(operators, e.Operator) {
		return ex, fmt.Errorf("unknown operator %q: use one of %s", e.Operator, join(operators))
	}
	switch e.Operator {
	case lvmv2.OpIn, lvmv2.OpNotIn:
		if len(e.Values) == 0 {
			return ex, fmt.Errorf("operator %s needs at least one value", e.Operator)
		}
	case lvmv2.OpExists, lvmv2.OpDoesNotExist, lvmv2.OpAny:
		if len(e.Values) > 0 {
			return ex, fmt.Errorf("operator %s takes no values; remove them", e.Operator)
		}
	case lvmv2.OpGt, lvmv2.OpLt:
		if e.Key != lvmv2.KeySize {
			return ex, fmt.Errorf("operator %s only applies to key size", e.Operator)
		}
		if len(e.Values) != 1 {
			return ex, fmt.Errorf("operator %s needs exactly one value, a quantity such as 100Gi", e.Operator)
		}
	}
	if e.Key == lvmv2.KeySize {
		for _, v := range e.Values {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return ex, fmt.Errorf("size value %q is not a quantity such as 500Gi", v)
			}
			ex.sizes = append(ex.sizes, q)
		}
	}
	if e.Key == lvmv2.KeyRotational {
		for _, v := range e.Values {
			if v != "true" && v != "false" {
				return ex, fmt.Errorf("rotational value %q must be \"true\" or \"false\"", v)
			}
		}
	}
	return ex, nil
}

// Match is the selector's verdict on one device.
type Match struct {
	// Selected is true when the device is picked.
	Selected bool
	// Explicit is true when the device is picked by name (v1 paths or optionalPaths; v2 path or kname
	// with In). Only such devices may be wiped.
	Explicit bool
	// Wildcard is true when the device is picked by Any or by the absence of a selector.
	Wildcard bool
	// Path is the selector's path or kname value that named the device, when it differs from the
	// device's kname (for status).
	Path string
	// Term is the 1-based device selector term that picked the device (0: not picked by a term).
	Term int
	// Partial is true when a device was not picked although some expression matched it: the near misses
	// worth explaining in status.
	Partial bool
	// Explanation says why the device was not picked, term by term.
	Explanation string
}

// Match decides whether the selector picks d. inv resolves paths (symlinks) the selector names.
func (s *Selector) Match(inv *blockdev.Inventory, d *blockdev.Device) Match {
	switch {
	case s.all:
		return Match{Selected: true, Wildcard: true}
	case s.terms == nil:
		for _, p := range append(slices.Clone(s.paths), s.optional...) {
			if resolvesTo(inv, p, d) {
				return Match{Selected: true, Explicit: true, Path: pathIfDifferent(p, d)}
			}
		}
		return Match{Explanation: fmt.Sprintf("%s is not one of the device selector's paths", d.KName)}
	}
	var why []string
	partial := false
	for ti, t := range s.terms {
		m, failed, anyMatched := t.match(inv, d)
		if m != nil {
			m.Term = ti + 1
			return *m
		}
		partial = partial || anyMatched
		prefix := ""
		if len(s.terms) > 1 {
			prefix = fmt.Sprintf("term %d: ", ti+1)
		}
		why = append(why, prefix+failed)
	}
	return Match{Partial: partial, Explanation: strings.Join(why, "; ")}
}

// match returns the match when every expression of the term matches; otherwise the first failure and
// whether any expression matched.
func (t term) match(inv *blockdev.Inventory, d *blockdev.Device) (*Match, string, bool) {
	m := &Match{Selected: true}
	matchedOne := false
	for _, e := range t.exprs {
		ok, why, named := e.match(inv, d)
		if !ok {
			return nil, why, matchedOne
		}
		if e.op != lvmv2.OpAny {
			matchedOne = true
		} else {
			m.Wildcard = true
		}
		if named != "" {
			m.Explicit = true
			if m.Path == "" {
				m.Path = pathIfDifferent(named, d)
			}
		}
	}
	if m.Explicit {
		m.Wildcard = false
	}
	return m, "", true
}

func pathIfDifferent(p string, d *blockdev.Device) string {
	if p == d.KName {
		return ""
	}
	return p
}

// resolvesTo reports whether path p names device d.
func resolvesTo(inv *blockdev.Inventory, p string, d *blockdev.Device) bool {
	if d.HasPath(p) {
		return true
	}
	if inv == nil {
		return false
	}
	r, ok := inv.Resolve(p)
	return ok && r.KName == d.KName
}

// property returns the device's values for a key; empty means "not reported".
func property(key lvmv2.DeviceSelectorKey, d *blockdev.Device) []string {
	one := func(s string) []string {
		if s = strings.TrimSpace(s); s == "" {
			return nil
		}
		return []string{s}
	}
	switch key {
	case lvmv2.KeyKName:
		out := []string{d.KName}
		if strings.HasPrefix(d.Name, "/dev/mapper/") {
			out = append(out, d.Name)
		}
		return out
	case lvmv2.KeyPath:
		return d.Paths()
	case lvmv2.KeySerial:
		return one(d.Serial)
	case lvmv2.KeyWWN:
		return one(d.WWN)
	case lvmv2.KeyModel:
		return one(d.Model)
	case lvmv2.KeyVendor:
		return one(d.Vendor)
	case lvmv2.KeyPartLabel:
		return one(d.PartLabel)
	case lvmv2.KeySize:
		if d.Size == 0 {
			return nil
		}
		return []string{strconv.FormatUint(d.Size, 10)}
	case lvmv2.KeyRotational:
		return []string{strconv.FormatBool(d.Rotational)}
	case lvmv2.KeyType:
		return one(d.Type)
	}
	return nil
}

// match evaluates one expression. named is the value that named the device (path or kname In).
func (e expr) match(inv *blockdev.Inventory, d *blockdev.Device) (ok bool, why, named string) {
	props := property(e.key, d)
	shown := "not reported"
	if len(props) > 0 {
		shown = props[0]
		if e.key == lvmv2.KeySize {
			shown = formatSize(d.Size)
		}
	}
	switch e.op {
	case lvmv2.OpAny:
		return true, "", ""
	case lvmv2.OpExists:
		if len(props) > 0 {
			return true, "", ""
		}
		return false, fmt.Sprintf("%s has no %s", d.KName, e.key), ""
	case lvmv2.OpDoesNotExist:
		if len(props) == 0 {
			return true, "", ""
		}
		return false, fmt.Sprintf("%s has %s %s", d.KName, e.key, shown), ""
	case lvmv2.OpGt, lvmv2.OpLt:
		limit := e.sizes[0]
		cmp := resource.NewQuantity(int64(min(d.Size, 1<<62)), resource.BinarySI).Cmp(limit)
		if (e.op == lvmv2.OpGt && cmp > 0) || (e.op == lvmv2.OpLt && cmp < 0) {
			return true, "", ""
		}
		rel := "greater"
		if e.op == lvmv2.OpLt {
			rel = "less"
		}
		return false, fmt.Sprintf("%s has size %s, not %s than %s", d.KName, shown, rel, limit.String()), ""
	}
	in := false
	for i, v := range e.values {
		if e.key == lvmv2.KeySize {
			if q := e.sizes[i]; q.CmpInt64(int64(min(d.Size, 1<<62))) == 0 {
				in = true
			}
			continue
		}
		if slices.Contains(props, strings.TrimSpace(v)) || ((e.key == lvmv2.KeyPath || e.key == lvmv2.KeyKName) && resolvesTo(inv, v, d)) {
			in = true
			if e.op == lvmv2.OpIn && (e.key == lvmv2.KeyPath || e.key == lvmv2.KeyKName) {
				named = v
			}
			break
		}
	}
	if e.op == lvmv2.OpIn {
		if in {
			return true, "", named
		}
		return false, fmt.Sprintf("%s has %s %s, not one of [%s]", d.KName, e.key, shown, strings.Join(e.values, ", ")), ""
	}
	if !in {
		return true, "", ""
	}
	return false, fmt.Sprintf("%s has %s %s, which is excluded by NotIn", d.KName, e.key, shown), ""
}

// formatSize renders bytes as a binary quantity (100Gi) when exact, else as bytes.
func formatSize(n uint64) string {
	return resource.NewQuantity(int64(min(n, 1<<62)), resource.BinarySI).String()
}

// NamedPath is a path the selector names explicitly, and whether the volume group needs it.
type NamedPath struct {
	Path string
	// Required is true for v1 paths: the volume group fails without it.
	Required bool
	// Optional is true for v1 optionalPaths: at least one of them must exist.
	Optional bool
}

// NamedPaths lists the paths the selector names explicitly (v1 paths and optionalPaths; v2 path and
// kname values with In), in selector order, each once. Paths that do not resolve are reported NotFound.
func (s *Selector) NamedPaths() []NamedPath {
	var out []NamedPath
	seen := map[string]bool{}
	add := func(p NamedPath) {
		if !seen[p.Path] {
			seen[p.Path] = true
			out = append(out, p)
		}
	}
	for _, p := range s.paths {
		add(NamedPath{Path: p, Required: true})
	}
	for _, p := range s.optional {
		add(NamedPath{Path: p, Optional: true})
	}
	for _, t := range s.terms {
		for _, e := range t.exprs {
			if e.op == lvmv2.OpIn && (e.key == lvmv2.KeyPath || e.key == lvmv2.KeyKName) {
				for _, v := range e.values {
					add(NamedPath{Path: v})
				}
			}
		}
	}
	return out
}

// Explicit reports whether the selector names every device it can pick (v1 paths, or every v2 term has a
// path or kname In expression): the condition for forceWipeDevicesAndDestroyAllData.
func (s *Selector) Explicit() bool {
	if s.all {
		return false
	}
	if s.terms == nil {
		return true
	}
	for _, t := range s.terms {
		named := false
		for _, e := range t.exprs {
			named = named || (e.op == lvmv2.OpIn && (e.key == lvmv2.KeyPath || e.key == lvmv2.KeyKName))
		}
		if !named {
			return false
		}
	}
	return true
}

// IsAll reports whether the selector picks every device (no v1 selector).
func (s *Selector) IsAll() bool { return s.all }

// HasPaths reports whether the selector is a v1 selector with paths or optionalPaths.
func (s *Selector) HasPaths() bool { return len(s.paths) > 0 || len(s.optional) > 0 }
