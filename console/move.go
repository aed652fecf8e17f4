package console

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/lvms-dev/lvms/api/move"
)

// MoveView is the state of moving a claim's volume to another node (`lvms move`), as the claim shows it:
// the status LVMS writes (move.AnnotationStatus) and the request the user wrote (move.AnnotationToNode).
type MoveView struct {
	ID         string `json:"id,omitempty"`
	Phase      string `json:"phase,omitempty"`
	TargetNode string `json:"targetNode,omitempty"`
	SourcePV   string `json:"sourcePV,omitempty"`
	TargetPV   string `json:"targetPV,omitempty"`
	// Progress is the copy's "<chunks>/<total>", while copying.
	Progress string `json:"progress,omitempty"`
	Message  string `json:"message,omitempty"`
	// Requested is the node the claim asks to be moved to, before LVMS answered (or after a refusal).
	Requested string `json:"requested,omitempty"`
	// Error says why the status annotation could not be read.
	Error  string `json:"error,omitempty"`
	Health Health `json:"health"`
	// What the status allows the user to do: request a move (none active), confirm the move awaiting
	// confirmation (with its ID), or abort the move or withdraw the request (before the swap).
	CanRequest bool `json:"canRequest"`
	CanConfirm bool `json:"canConfirm"`
	CanAbort   bool `json:"canAbort"`
}

// Active reports whether a move holds the claim (begun, not done, aborted or refused).
func (m *MoveView) Active() bool { return m != nil && move.Phase(m.Phase).Active() }

// moveOf reads a claim's move; nil when the claim shows no move and requests none (then a move may be
// requested).
func moveOf(c *corev1.PersistentVolumeClaim) *MoveView {
	st, ok, err := move.ParseStatus(c)
	requested := c.Annotations[move.AnnotationToNode]
	if !ok && requested == "" {
		return nil
	}
	v := &MoveView{Requested: requested, Health: HealthInfo}
	if err != nil {
		v.Error, v.Health = err.Error(), HealthError
		return v
	}
	if ok {
		v.ID, v.Phase, v.TargetNode, v.SourcePV, v.TargetPV = st.ID, string(st.Phase), st.TargetNode, st.SourcePV, st.TargetPV
		v.Progress, v.Message = st.Progress, st.Message
	}
	p := st.Phase
	switch p {
	case move.PhaseRefused:
		v.Health = HealthWarning
	case move.PhaseAwaitingConfirmation:
		v.Health = HealthWarning
	case move.PhaseDone:
		v.Health = HealthOK
	}
	v.CanRequest = !p.Active()
	v.CanConfirm = p == move.PhaseAwaitingConfirmation && st.ID != ""
	v.CanAbort = (p.Active() && !p.PastAbort()) || (!p.Active() && requested != "")
	return v
}

// MoveTargets are the nodes each device class is on, by device class, sorted by node: where a volume of
// that class may be moved to (the operator's preflight checks the rest).
func MoveTargets(s *Snapshot) map[string][]string {
	x := newIndex(s)
	out := map[string][]string{}
	for _, name := range x.names {
		nv, ok := x.node(name, false)
		if !ok {
			continue
		}
		seen := map[string]bool{}
		for _, dc := range nv.DeviceClasses {
			if !seen[dc.Name] {
				seen[dc.Name] = true
				out[dc.Name] = append(out[dc.Name], name)
			}
		}
	}
	return out
}
