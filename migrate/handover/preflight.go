package handover

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/migrate/plan"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/usage"
)

// Verdict of one preflight check.
type Verdict string

// Verdicts. Only Fail stops a migration; Warn names a risk preflight cannot rule out; Info lists facts.
const (
	Pass Verdict = "Pass"
	Warn Verdict = "Warn"
	Fail Verdict = "Fail"
	Info Verdict = "Info"
)

// Check is one preflight check's outcome.
type Check struct {
	// Name is a stable identifier (plan, record, dry-run, permissions, cluster-ready, claims, coverage,
	// volumes, agent-version).
	Name    string
	Verdict Verdict
	// Reason says what was found; Fix what to do about it (empty on Pass and Info).
	Reason string
	Fix    string
	// Details are one line each (for example every volume on the classes, with its node).
	Details []string
}

// PreflightOptions tune Preflight.
type PreflightOptions struct {
	// AcceptLossy lets a lossy plan pass (as `lvms migrate plan --accept-lossy`).
	AcceptLossy bool
}

// Preflight checks that the migration p plans can run now, without writing anything: every check runs,
// so one report lists every problem.
func (m *Migrator) Preflight(ctx context.Context, p *plan.Plan, opts PreflightOptions) ([]Check, error) {
	cl, rec, sets, err := m.loadRecord(ctx, p.Namespace, p.Name)
	var checks []Check
	var recErr *RecordError
	switch {
	case asRecordError(err, &recErr):
		checks = append(checks, Check{Name: "record", Verdict: Fail, Reason: recErr.Error(), Fix: "see the reason"})
	case err != nil:
		return nil, err
	case cl == nil:
		return nil, fmt.Errorf("no LVMCluster %s/%s", p.Namespace, p.Name)
	case rec != nil:
		checks = append(checks, Check{Name: "record", Verdict: Info, Reason: fmt.Sprintf("a migration of this LVMCluster is under way (step %s, %d of %d nodes handed over); apply resumes it", rec.Step, len(rec.HandedOver), len(rec.Nodes))})
	default:
		checks = append(checks, Check{Name: "record", Verdict: Pass, Reason: "no migration under way"})
	}
	if cl == nil {
		return checks, nil
	}
	checks = append(checks, checkPlan(p, opts))
	dry, err := m.checkDryRun(ctx, cl, p)
	if err != nil {
		return nil, err
	}
	checks = append(checks, dry)
	perm, err := m.checkPermissions(ctx, p.Namespace)
	if err != nil {
		return nil, err
	}
	checks = append(checks, perm)
	ready, err := m.checkReady(ctx, cl, handedOver(sets))
	if err != nil {
		return nil, err
	}
	checks = append(checks, ready)
	claimed, covered, err := m.checkClaims(ctx, cl, p)
	if err != nil {
		return nil, err
	}
	checks = append(checks, claimed, covered)
	vols, err := m.checkVolumes(ctx, p)
	if err != nil {
		return nil, err
	}
	agents, err := m.checkAgents(ctx, cl, handedOver(sets))
	if err != nil {
		return nil, err
	}
	checks = append(checks, vols, agents)
	return checks, nil
}

func asRecordError(err error, target **RecordError) bool {
	if e, ok := err.(*RecordError); ok {
		*target = e
		return true
	}
	return false
}

// Failed reports whether any check failed.
func Failed(checks []Check) bool {
	return slices.ContainsFunc(checks, func(c Check) bool { return c.Verdict == Fail })
}

func checkPlan(p *plan.Plan, opts PreflightOptions) Check {
	lossy, _ := p.Counts()
	switch {
	case lossy == 0:
		return Check{Name: "plan", Verdict: Pass, Reason: "the plan is exact"}
	case opts.AcceptLossy:
		return Check{Name: "plan", Verdict: Warn, Reason: fmt.Sprintf("the plan is lossy (%s in v2alpha1); accepted", plan.LossyMappings(lossy)),
			Fix: "read them in lvms migrate plan"}
	}
	return Check{Name: "plan", Verdict: Fail, Reason: fmt.Sprintf("the plan is lossy: %s in v2alpha1", plan.LossyMappings(lossy)),
		Fix: "read them in lvms migrate plan, then run again with --accept-lossy"}
}

// checkDryRun sends every write of apply's first steps to the API server as a dry run: the sets (schema,
// CEL rules, admission) and the mark on the LVMCluster.
func (m *Migrator) checkDryRun(ctx context.Context, cl *lvmv1.LVMCluster, p *plan.Plan) (Check, error) {
	var problems []string
	for i := range p.NodeSets {
		set := p.NodeSets[i].DeepCopy()
		set.Namespace = cl.Namespace
		var cur lvmv2.LVMNodeSet
		if err := m.Client.Get(ctx, client.ObjectKeyFromObject(set), &cur); err == nil && cur.Annotations[names.MigratedFromAnnotation] != cl.Name {
			problems = append(problems, fmt.Sprintf("LVMNodeSet %s exists and is not a migration of LVMCluster %s", set.Name, cl.Name))
			continue
		}
		u, err := applyConfig(m.Client, set)
		if err != nil {
			return Check{}, err
		}
		if err := m.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(names.MigrateFieldOwner), client.ForceOwnership, client.DryRunAll); err != nil {
			problems = append(problems, fmt.Sprintf("LVMNodeSet %s: %v", set.Name, err))
		}
	}
	base := cl.DeepCopy()
	marked := cl.DeepCopy()
	if marked.Annotations == nil {
		marked.Annotations = map[string]string{}
	}
	marked.Annotations[names.KeepStorageOnDeleteAnnotation] = "true"
	if err := m.Client.Patch(ctx, marked, client.MergeFrom(base), client.DryRunAll); err != nil {
		problems = append(problems, fmt.Sprintf("marking LVMCluster %s: %v", cl.Name, err))
	}
	if len(problems) > 0 {
		return Check{Name: "dry-run", Verdict: Fail, Reason: "the API server refused: " + strings.Join(problems, "; "),
			Fix: "fix what the API server names (a set of that name that belongs to something else: rename or delete it), then run preflight again"}, nil
	}
	return Check{Name: "dry-run", Verdict: Pass, Reason: fmt.Sprintf("the API server accepts the %d LVMNodeSet(s) and the mark on the LVMCluster (dry run)", len(p.NodeSets))}, nil
}

// checkPermissions asks the API server, for the caller itself, about every write apply and rollback make
// and every read they need (SelfSubjectAccessReview).
func (m *Migrator) checkPermissions(ctx context.Context, ns string) (Check, error) {
	needs := Needs(ActionApply, ActionRollback)
	missing, err := m.Missing(ctx, ns, needs)
	if err != nil {
		return Check{}, err
	}
	if len(missing) > 0 {
		return Check{Name: "permissions", Verdict: Fail, Reason: "you may not " + strings.Join(missing, "; "),
			Fix: "ask a cluster administrator to grant these verbs (a Role in the namespace and a ClusterRole for the cluster-scoped resources), or run as a user who has them"}, nil
	}
	return Check{Name: "permissions", Verdict: Pass, Reason: fmt.Sprintf("you may make every write and read the migration needs (%d checked)", len(needs))}, nil
}

// checkReady wants every node the LVMCluster manages (not yet handed over) Ready for every device class.
func (m *Migrator) checkReady(ctx context.Context, cl *lvmv1.LVMCluster, handed []string) (Check, error) {
	statuses, err := v1Nodes(ctx, m.Client, cl)
	if err != nil {
		return Check{}, err
	}
	var problems []string
	for _, st := range statuses {
		if slices.Contains(handed, st.Name) {
			continue
		}
		if len(st.Spec.LVMVGStatus) == 0 {
			problems = append(problems, fmt.Sprintf("node %s: the node agent reported no volume group", st.Name))
		}
		for _, vg := range st.Spec.LVMVGStatus {
			if vg.Status != lvmv1.VGStatusReady {
				problems = append(problems, fmt.Sprintf("node %s: volume group %s is %s: %s", st.Name, vg.Name, vg.Status, vg.Reason))
			}
		}
	}
	if len(statuses) == 0 && len(handed) == 0 {
		problems = append(problems, "the LVMCluster manages no node (no LVMVolumeGroupNodeStatus belongs to it)")
	}
	if len(problems) > 0 {
		return Check{Name: "cluster-ready", Verdict: Fail, Reason: "the LVMCluster is not Ready everywhere: " + strings.Join(problems, "; "),
			Fix: "fix those nodes first (the LVMCluster's status and lvms analyze explain why), then run preflight again: a node is handed over only when v2 can show exactly what v1 shows"}, nil
	}
	return Check{Name: "cluster-ready", Verdict: Pass, Reason: fmt.Sprintf("every volume group is Ready on the %d node(s) the LVMCluster manages", len(statuses))}, nil
}

// checkAgents wants the node agent of every node still to hand over to announce that it adopts volume
// groups as they are (lvmv1.CapabilityAdoptVolumeGroups in its node facts): an older agent might wipe and
// recreate what it does not recognise.
func (m *Migrator) checkAgents(ctx context.Context, cl *lvmv1.LVMCluster, handed []string) (Check, error) {
	statuses, err := v1Nodes(ctx, m.Client, cl)
	if err != nil {
		return Check{}, err
	}
	var problems, versions []string
	for _, st := range statuses {
		if slices.Contains(handed, st.Name) {
			continue
		}
		facts, err := lvmv1.ParseNodeFacts(st.Annotations)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("node %s: %v", st.Name, err))
		case facts.Agent == nil:
			problems = append(problems, fmt.Sprintf("node %s: its node agent does not say which version it runs (an agent older than adoption)", st.Name))
		case !facts.Agent.Can(lvmv1.CapabilityAdoptVolumeGroups):
			problems = append(problems, fmt.Sprintf("node %s: its node agent (version %s) does not adopt existing volume groups", st.Name, nonEmpty(facts.Agent.Version, "unknown")))
		default:
			if v := nonEmpty(facts.Agent.Version, "unknown"); !slices.Contains(versions, v) {
				versions = append(versions, v)
			}
		}
	}
	if len(problems) > 0 {
		return Check{Name: "agent-version", Verdict: Fail, Reason: strings.Join(problems, "; "),
			Fix: "upgrade the node agent DaemonSet to this release and wait until every agent has reported again (the LVMVolumeGroupNodeStatus annotation " + lvmv1.NodeFactsAnnotation + " names its version), then run preflight again"}, nil
	}
	if len(versions) == 0 {
		return Check{Name: "agent-version", Verdict: Pass, Reason: "no node is left to hand over, so no node agent's version matters"}, nil
	}
	slices.Sort(versions)
	label := "version"
	if len(versions) > 1 {
		label = "versions"
	}
	return Check{Name: "agent-version", Verdict: Pass, Reason: fmt.Sprintf("every node agent adopts existing volume groups as they are (%s %s)", label, strings.Join(versions, ", "))}, nil
}

// checkClaims wants no other LVMNodeSet selecting the LVMCluster's nodes, and every such node selected by a
// planned set.
func (m *Migrator) checkClaims(ctx context.Context, cl *lvmv1.LVMCluster, p *plan.Plan) (claimed, covered Check, err error) {
	statuses, err := v1Nodes(ctx, m.Client, cl)
	if err != nil {
		return claimed, covered, err
	}
	var list lvmv2.LVMNodeSetList
	if err := m.Client.List(ctx, &list, client.InNamespace(cl.Namespace)); err != nil {
		return claimed, covered, fmt.Errorf("list LVMNodeSets in %s: %w", cl.Namespace, err)
	}
	var conflicts, uncovered []string
	for _, st := range statuses {
		var n corev1.Node
		if err := m.Client.Get(ctx, client.ObjectKey{Name: st.Name}, &n); err != nil {
			return claimed, covered, fmt.Errorf("get Node %s: %w", st.Name, err)
		}
		for i := range list.Items {
			s := &list.Items[i]
			if s.Annotations[names.MigratedFromAnnotation] == cl.Name {
				continue // this migration's own set, from an earlier run
			}
			if ok, err := selects(s, &n); err == nil && ok {
				conflicts = append(conflicts, fmt.Sprintf("LVMNodeSet %s selects node %s", s.Name, n.Name))
			}
		}
		if !slices.ContainsFunc(p.NodeSets, func(s lvmv2.LVMNodeSet) bool { ok, _ := selects(&s, &n); return ok }) {
			uncovered = append(uncovered, n.Name)
		}
	}
	claimed = Check{Name: "claims", Verdict: Pass, Reason: "no other LVMNodeSet selects the LVMCluster's nodes"}
	if len(conflicts) > 0 {
		claimed = Check{Name: "claims", Verdict: Fail, Reason: strings.Join(conflicts, "; ") + ", which the LVMCluster manages",
			Fix: "change that set's node selector (or delete it) so that it selects none of the LVMCluster's nodes: the operator would report a conflict and the hand-over could not be decided"}
	}
	covered = Check{Name: "coverage", Verdict: Pass, Reason: "every node the LVMCluster manages is selected by a planned LVMNodeSet"}
	if len(uncovered) > 0 {
		covered = Check{Name: "coverage", Verdict: Fail, Reason: "no planned LVMNodeSet selects node(s) " + strings.Join(uncovered, ", ") + ", which the LVMCluster manages: their volume groups would be left without a manager",
			Fix: "label the nodes as the LVMCluster's node selectors expect (the plan follows them), or move their data off and take them out of the LVMCluster first"}
	}
	return claimed, covered, nil
}

// checkVolumes lists every PVC and PV on the planned StorageClasses with its node: the volumes the
// migration carries over.
func (m *Migrator) checkVolumes(ctx context.Context, p *plan.Plan) (Check, error) {
	scs, _ := classNames(p)
	var pvs corev1.PersistentVolumeList
	if err := m.Client.List(ctx, &pvs); err != nil {
		return Check{}, fmt.Errorf("list PersistentVolumes: %w", err)
	}
	var pvcs corev1.PersistentVolumeClaimList
	if err := m.Client.List(ctx, &pvcs); err != nil {
		return Check{}, fmt.Errorf("list PersistentVolumeClaims: %w", err)
	}
	key := driver.New(false).TopologyKey()
	var details []string
	bound := map[string]bool{}
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		if !slices.Contains(scs, pv.Spec.StorageClassName) {
			continue
		}
		line := fmt.Sprintf("PersistentVolume %s (StorageClass %s) on node %s", pv.Name, pv.Spec.StorageClassName, nonEmpty(usage.PVNode(pv, key), "(none)"))
		if ref := pv.Spec.ClaimRef; ref != nil {
			line += fmt.Sprintf(", bound to PersistentVolumeClaim %s/%s", ref.Namespace, ref.Name)
			bound[ref.Namespace+"/"+ref.Name] = true
		}
		details = append(details, line)
	}
	for _, pvc := range pvcs.Items {
		if pvc.Spec.StorageClassName == nil || !slices.Contains(scs, *pvc.Spec.StorageClassName) || bound[pvc.Namespace+"/"+pvc.Name] {
			continue
		}
		details = append(details, fmt.Sprintf("PersistentVolumeClaim %s/%s (StorageClass %s) not bound yet, node %s", pvc.Namespace, pvc.Name,
			*pvc.Spec.StorageClassName, nonEmpty(pvc.Annotations["volume.kubernetes.io/selected-node"], "not chosen")))
	}
	slices.Sort(details)
	return Check{Name: "volumes", Verdict: Info, Details: details,
		Reason: fmt.Sprintf("%d volume(s) use the planned StorageClasses; they keep working throughout (same classes, volume groups and LVs)", len(details))}, nil
}

func nonEmpty(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}
