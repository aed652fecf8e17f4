package bundle

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/lvms-dev/lvms/nodeagent/diagnostics"
)

// AgentRecord is nodes/<node>/agent.json: the part of a node agent's view that is not in the other node
// files, and how the collector got it.
type AgentRecord struct {
	Node string `json:"node"`
	// Pod is the node agent pod, namespace/name.
	Pod string `json:"pod"`
	// APIVersion of the view the agent served.
	APIVersion string `json:"apiVersion"`
	// Version of the agent's binary.
	Version string `json:"version"`
	// AgentTime is the agent's clock when it made the view.
	AgentTime time.Time `json:"agentTime"`
	// FetchedAt is the collector's clock halfway through the request; RoundTrip its duration. The
	// difference between AgentTime and FetchedAt, beyond half the round trip, is clock skew.
	FetchedAt time.Time     `json:"fetchedAt"`
	RoundTrip time.Duration `json:"roundTripNanos"`
	// LVMD is lvmd.yaml's path, whether it exists and why it is invalid (its content is in lvmd.yaml).
	LVMD *diagnostics.LVMDFile `json:"lvmd,omitempty"`
	// Errors are the sections the agent could not read.
	Errors []diagnostics.SectionError `json:"errors,omitempty"`
}

// ClockSkew is how far the agent's clock is from the reference clock, less the uncertainty of the round
// trip (0 when within it); negative when the agent is behind. The reference is the collector's clock moved
// by offset (the API server's clock minus the collector's; 0 compares with the collector).
func (r AgentRecord) ClockSkew(offset time.Duration) time.Duration {
	d := r.AgentTime.Sub(r.FetchedAt.Add(offset))
	slack := r.RoundTrip / 2
	switch {
	case d > slack:
		return d - slack
	case d < -slack:
		return d + slack
	}
	return 0
}

// NodeFiles splits a view into the files of nodes/<node>/.
func NodeFiles(v *diagnostics.View, pod string, fetchedAt time.Time, roundTrip time.Duration) (map[string][]byte, error) {
	out := map[string][]byte{}
	if len(v.Lsblk) > 0 {
		out[NodeLsblk] = append(indentJSON(v.Lsblk), '\n')
	}
	if len(v.FullReport) > 0 {
		out[NodeFullReport] = append(indentJSON(v.FullReport), '\n')
	}
	rec := AgentRecord{Node: v.Node, Pod: pod, APIVersion: v.APIVersion, Version: v.Version, AgentTime: v.Time,
		FetchedAt: fetchedAt.UTC(), RoundTrip: roundTrip, Errors: v.Errors}
	if v.LVMD != nil {
		l := *v.LVMD
		if l.Exists {
			out[NodeLVMD] = []byte(l.Content)
		}
		l.Content = ""
		rec.LVMD = &l
	}
	if v.Verdicts != nil {
		b, err := json.MarshalIndent(v.Verdicts, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("device verdicts of %s: %w", v.Node, err)
		}
		out[NodeVerdicts] = append(b, '\n')
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("agent record of %s: %w", v.Node, err)
	}
	out[NodeAgent] = append(b, '\n')
	return out, nil
}

func indentJSON(raw json.RawMessage) []byte {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return raw
	}
	return b
}

// NodeState is one node's files read back: the agent's record and its view.
type NodeState struct {
	Record AgentRecord
	View   *diagnostics.View
}

// readNode rebuilds a node's state from its files (get returns a node file's content).
func readNode(node string, get func(file string) ([]byte, bool)) (*NodeState, error) {
	rec := AgentRecord{Node: node}
	if b, ok := get(NodeAgent); ok {
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("%s: %w", NodeAgent, err)
		}
	}
	v := &diagnostics.View{APIVersion: rec.APIVersion, Node: node, Version: rec.Version, Time: rec.AgentTime, Errors: rec.Errors}
	if b, ok := get(NodeLsblk); ok {
		if !json.Valid(b) {
			return nil, fmt.Errorf("%s is not JSON", NodeLsblk)
		}
		v.Lsblk = b
	}
	if b, ok := get(NodeFullReport); ok {
		if !json.Valid(b) {
			return nil, fmt.Errorf("%s is not JSON", NodeFullReport)
		}
		v.FullReport = b
	}
	if rec.LVMD != nil {
		l := *rec.LVMD
		if b, ok := get(NodeLVMD); ok {
			l.Content = string(b)
		}
		v.LVMD = &l
	}
	if b, ok := get(NodeVerdicts); ok {
		if err := json.Unmarshal(b, &v.Verdicts); err != nil {
			return nil, fmt.Errorf("%s: %w", NodeVerdicts, err)
		}
	}
	return &NodeState{Record: rec, View: v}, nil
}
