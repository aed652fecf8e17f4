package wizard

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/migrate/handover"
	"github.com/lvms-dev/lvms/migrate/plan"
	"github.com/lvms-dev/lvms/migrate/record"
)

// Step is one step the wizard offers.
type Step struct {
	Action handover.Action
	Title  string
	// Available says the migration's state allows the step now; Why says why not (or, when available, a
	// sentence on what it will do).
	Available bool
	Why       string
	// Missing are the permissions the caller lacks for it ("patch lvmclusters.lvm.topolvm.io in namespace x").
	Missing []string
}

// Enabled reports whether the caller can take the step now.
func (s Step) Enabled() bool { return s.Available && len(s.Missing) == 0 }

// NodeState is one node of the hand-over as the record shows it.
type NodeState struct {
	Name       string
	HandedOver bool
}

// State is the migration of one LVMCluster as the caller can see it.
type State struct {
	Namespace, Cluster string
	// Plan is the plan of the LVMCluster as it is now; nil once it is gone. PlanError says why there is none
	// while it exists (an LVMCluster v2alpha1 cannot express).
	Plan      *plan.Plan
	PlanError string
	// Record is the migration's record; nil before apply first ran.
	Record *record.Record
	// ClusterGone: the LVMCluster does not exist (any more).
	ClusterGone bool
	Nodes       []NodeState
	Steps       []Step
}

// Step returns the step of an action.
func (s *State) Step(a handover.Action) Step {
	i := slices.IndexFunc(s.Steps, func(st Step) bool { return st.Action == a })
	if i < 0 {
		return Step{Action: a}
	}
	return s.Steps[i]
}

// Done reports whether the migration finished (the LVMCluster's removal was asked for).
func (s *State) Done() bool { return s.Record != nil && s.Record.Step == record.StepClusterRemoved }

// Clusters lists the LVMClusters the caller may see: in every namespace, or in ns when the caller may not
// list cluster-wide (ns "" lists only cluster-wide).
func Clusters(ctx context.Context, c client.Client, ns string) ([]lvmv1.LVMCluster, error) {
	var list lvmv1.LVMClusterList
	err := c.List(ctx, &list)
	if err != nil && ns != "" {
		err = c.List(ctx, &list, client.InNamespace(ns))
	}
	if err != nil {
		return nil, fmt.Errorf("list LVMClusters: %w", err)
	}
	return list.Items, nil
}

// Load reads the migration of LVMCluster ns/name with c (the caller's client): its plan, its record and,
// for every step, whether it is available and which permissions the caller lacks. preflightPassed says a
// preflight of this migration passed (in this process) since the last change: apply starts only then, but
// resumes without one.
func Load(ctx context.Context, c client.Client, ns, name string, preflightPassed bool) (*State, error) {
	st := &State{Namespace: ns, Cluster: name}
	m := &handover.Migrator{Client: c}
	rec, gone, err := handover.ReadRecord(ctx, c, ns, name)
	if err != nil {
		return nil, err
	}
	st.Record, st.ClusterGone = rec, gone
	if !gone {
		p, err := handover.PlanFromCluster(ctx, c, ns, name)
		var invalid *plan.InvalidError
		switch {
		case errors.As(err, &invalid):
			st.PlanError = err.Error()
		case err != nil:
			return nil, err
		}
		st.Plan = p
	}
	if rec != nil {
		for _, n := range rec.Nodes {
			st.Nodes = append(st.Nodes, NodeState{Name: n, HandedOver: slices.Contains(rec.HandedOver, n)})
		}
	}
	actions := []handover.Action{handover.ActionPlan, handover.ActionPreflight, handover.ActionApply, handover.ActionVerify, handover.ActionRollback}
	for _, a := range actions {
		st.Steps = append(st.Steps, availability(st, a, preflightPassed))
	}
	// One access review per permission, for every step: a caller sees what they lack before the state
	// offers the step (apply before preflight has passed, say).
	var asks []handover.Access
	for _, s := range st.Steps {
		asks = append(asks, handover.Needs(s.Action)...)
	}
	denied, err := m.Denied(ctx, ns, asks)
	if err != nil {
		return nil, err
	}
	for i := range st.Steps {
		for _, need := range handover.Needs(st.Steps[i].Action) {
			if denied[need] {
				st.Steps[i].Missing = append(st.Steps[i].Missing, need.Where(ns))
			}
		}
	}
	return st, nil
}

// titles are the steps' names in the front ends.
var titles = map[handover.Action]string{
	handover.ActionPlan: "Plan", handover.ActionPreflight: "Preflight", handover.ActionApply: "Apply",
	handover.ActionVerify: "Verify", handover.ActionRollback: "Roll back",
}

// Title is the step's name in the front ends.
func Title(a handover.Action) string { return titles[a] }

// availability decides from the migration's state alone whether a step makes sense now.
func availability(st *State, a handover.Action, preflightPassed bool) Step {
	s := Step{Action: a, Title: titles[a]}
	rec := st.Record
	no := func(why string) Step { s.Why = why; return s }
	yes := func(what string) Step { s.Available, s.Why = true, what; return s }
	switch a {
	case handover.ActionPlan:
		switch {
		case st.ClusterGone:
			return no("the LVMCluster is gone: there is nothing left to plan")
		case st.PlanError != "":
			return no(st.PlanError)
		}
		return yes("what the LVMCluster becomes, read-only")
	case handover.ActionPreflight:
		switch {
		case st.ClusterGone || st.Done():
			return no("the migration is finished")
		case st.Plan == nil:
			return no("there is no plan: fix the LVMCluster first")
		}
		return yes("check, without writing anything, that the migration can run now")
	case handover.ActionApply:
		switch {
		case st.Done():
			return no("the migration is finished")
		case st.ClusterGone:
			return no("the LVMCluster is gone and no migration of it was recorded")
		case rec != nil:
			return yes(fmt.Sprintf("resume the migration under way (step %s, %d of %d nodes handed over)", rec.Step, len(rec.HandedOver), len(rec.Nodes)))
		case !preflightPassed:
			return no("run preflight first: apply starts only after a preflight with no failed check")
		}
		return yes("migrate node by node; the volumes keep working throughout")
	case handover.ActionVerify:
		if rec == nil {
			return no("nothing to compare yet: apply records what v1 shows when it starts")
		}
		return yes("compare volume groups, volumes, PVs, classes and capacity with what was recorded")
	case handover.ActionRollback:
		switch {
		case rec == nil:
			return no("no migration under way")
		case rec.Step.Reached(record.StepClusterRemoved):
			return no("the LVMCluster's removal was asked for: there is nothing left to hand the nodes back to")
		}
		return yes("hand every node back to the LVMCluster and remove the sets, keeping all storage")
	}
	return no("unknown step")
}
