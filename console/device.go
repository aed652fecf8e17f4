package console

import (
	"slices"

	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/console/explain"
)

// Device returns one device of a node in every volume group that considered it, with every filter's
// verdict. kname may also be the path the selector used. It fails with a *NotFoundError when the node or the
// device is unknown.
func Device(s *Snapshot, node, kname string) (*DeviceView, error) {
	nv, err := Node(s, node)
	if err != nil {
		return nil, err
	}
	v := &DeviceView{Node: node, KName: kname, Health: HealthOK, At: s.At}
	for _, g := range nv.VolumeGroups {
		for _, r := range g.Devices {
			if r.KName != kname && (r.Path == "" || r.Path != kname) {
				continue
			}
			v.Entries = append(v.Entries, DeviceEntry{VolumeGroup: g.Name, Source: g.Source, Row: r, Verdicts: verdicts(r)})
			v.Health = worse(v.Health, r.Health)
		}
	}
	if len(v.Entries) == 0 {
		return nil, &NotFoundError{Kind: "device", Name: kname, Within: "node " + node}
	}
	slices.SortStableFunc(v.Entries, func(a, b DeviceEntry) int { return b.Row.Health.Rank() - a.Row.Health.Rank() })
	return v, nil
}

// verdicts lists every filter in the node agent's order with its outcome for a device: the ones the agent
// named as reasons excluded it; after NotFound nothing else could be evaluated; devices in the volume group
// passed every filter. Unknown codes from a newer agent follow the known ones.
func verdicts(r DeviceRow) []Verdict {
	byCode := map[string]Reason{}
	for _, rs := range r.Reasons {
		byCode[rs.Code] = rs
	}
	_, notFound := byCode[string(lvmv2.ReasonNotFound)]
	evaluated := (r.State != DeviceMissing && r.State != DeviceUnresolved && r.State != DeviceUnlisted) || len(r.Reasons) > 0
	var out []Verdict
	for _, code := range explain.Codes() {
		v := Verdict{Code: code, Filter: explain.Filter(code), Outcome: OutcomePassed}
		if rs, ok := byCode[code]; ok {
			v.Outcome, v.Sentence = OutcomeExcluded, rs.Sentence
			delete(byCode, code)
		} else if notFound || !evaluated {
			v.Outcome = OutcomeNotEvaluated
		}
		out = append(out, v)
	}
	for _, rs := range r.Reasons {
		if _, left := byCode[rs.Code]; left {
			out = append(out, Verdict{Code: rs.Code, Filter: explain.Filter(rs.Code), Outcome: OutcomeExcluded, Sentence: rs.Sentence})
			delete(byCode, rs.Code)
		}
	}
	return out
}
