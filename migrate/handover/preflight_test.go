package handover_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/migrate/handover"
	"github.com/lvms-dev/lvms/migrate/plan"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/optest"
)

func checkNamed(checks []handover.Check, name string) handover.Check {
	for _, c := range checks {
		if c.Name == name {
			return c
		}
	}
	return handover.Check{}
}

// TestPreflight_Failures: each problem preflight looks for fails its own check with a reason naming it and
// a fix; a healthy cluster passes every check.
func TestPreflight_Failures(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	v1 := func(node string, vg *lvmv1.LVMVolumeGroup) lvmv1.VGStatus {
		st := optest.V1Ready(node, vg)
		if strings.HasSuffix(node, "-b") && strings.HasSuffix(vg.Name, "othervg") {
			st.Status, st.Reason = lvmv1.VGStatusDegraded, "a disk is missing"
		}
		return st
	}
	cases := []struct {
		name  string
		v1    optest.V1Report
		setup func(t *testing.T, f *fixture, p *plan.Plan) (*handover.Migrator, handover.PreflightOptions)
		check string
		want  []string
	}{
		{"healthy", optest.V1Ready, nil, "", nil},
		{"lossy plan", optest.V1Ready, func(t *testing.T, f *fixture, p *plan.Plan) (*handover.Migrator, handover.PreflightOptions) {
			return f.migrator(f.C), handover.PreflightOptions{}
		}, "plan", []string{"the plan is lossy", "--accept-lossy"}},
		{"not ready", v1, nil, "cluster-ready", []string{"volume group " + "NS-othervg is Degraded: a disk is missing"}},
		{"another set selects a node", optest.V1Ready, func(t *testing.T, f *fixture, p *plan.Plan) (*handover.Migrator, handover.PreflightOptions) {
			other := p.NodeSets[0].DeepCopy()
			other.Name, other.Annotations = "other", nil
			f.Create(other)
			return nil, handover.PreflightOptions{AcceptLossy: true}
		}, "claims", []string{"LVMNodeSet other selects node NS-a"}},
		{"an agent older than adoption", optest.V1Ready, func(t *testing.T, f *fixture, p *plan.Plan) (*handover.Migrator, handover.PreflightOptions) {
			return f.migrator(&oldAgentOn{Client: f.C, node: f.Nodes[1]}), handover.PreflightOptions{AcceptLossy: true}
		}, "agent-version", []string{"node NS-b: its node agent does not say which version it runs", "upgrade the node agent DaemonSet"}},
		{"a planned set's name is taken", optest.V1Ready, func(t *testing.T, f *fixture, p *plan.Plan) (*handover.Migrator, handover.PreflightOptions) {
			other := p.NodeSets[0].DeepCopy()
			other.Annotations = nil
			other.Spec.NodeSelector = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "nowhere", Operator: corev1.NodeSelectorOpExists}}}}}
			f.Create(other)
			return nil, handover.PreflightOptions{AcceptLossy: true}
		}, "dry-run", []string{"LVMNodeSet my-lvmcluster exists and is not a migration of LVMCluster my-lvmcluster"}},
		{"a node no planned set selects", optest.V1Ready, func(t *testing.T, f *fixture, p *plan.Plan) (*handover.Migrator, handover.PreflightOptions) {
			p.NodeSets[0].Spec.NodeSelector.NodeSelectorTerms[0].MatchExpressions[0].Values = []string{"elsewhere"}
			return nil, handover.PreflightOptions{AcceptLossy: true}
		}, "coverage", []string{"no planned LVMNodeSet selects node(s) NS-a, NS-b"}},
		{"missing permissions", optest.V1Ready, func(t *testing.T, f *fixture, p *plan.Plan) (*handover.Migrator, handover.PreflightOptions) {
			// A user who may only read LVMClusters, impersonated by the test's admin.
			user := "reader-" + f.NS
			env.GrantIn(t, f.NS, "reader", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user},
				rbacv1.PolicyRule{APIGroups: []string{lvmv1.GroupVersion.Group}, Resources: []string{"lvmclusters"}, Verbs: []string{"get", "list"}})
			cfg := rest.CopyConfig(env.Config)
			cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
			c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
			if err != nil {
				t.Fatal(err)
			}
			// The reads preflight makes itself still go through the admin; only the access review is the user's.
			return f.migrator(&reviewAs{Client: f.C, as: c}), handover.PreflightOptions{AcceptLossy: true}
		}, "permissions", []string{"you may not ", "patch lvmclusters.lvm.topolvm.io in namespace NS", "create lvmnodesets.lvm.topolvm.io in namespace NS", "delete lvmclusters"}},
		{"malformed record", optest.V1Ready, func(t *testing.T, f *fixture, p *plan.Plan) (*handover.Migrator, handover.PreflightOptions) {
			cl := f.Cluster()
			base := cl.DeepCopy()
			cl.Annotations = map[string]string{names.MigrationStateAnnotation: "{not json"}
			if err := f.C.Patch(ctx, cl, client.MergeFrom(base)); err != nil {
				t.Fatal(err)
			}
			return nil, handover.PreflightOptions{AcceptLossy: true}
		}, "record", []string{"annotation " + names.MigrationStateAnnotation + " on LVMCluster NS/my-lvmcluster is not a valid migration record", "remove it"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.v1)
			p := f.Plan()
			m, opts := f.migrator(f.C), handover.PreflightOptions{AcceptLossy: true}
			if tc.setup != nil {
				mm, o := tc.setup(t, f, p)
				if mm != nil {
					m = mm
				}
				opts = o
			}
			checks, err := m.Preflight(ctx, p, opts)
			if err != nil {
				t.Fatalf("preflight: %v", err)
			}
			for _, c := range checks {
				failed := c.Verdict == handover.Fail
				if failed != (c.Name == tc.check) {
					t.Errorf("check %s is %s (%s), want failed: %v", c.Name, c.Verdict, c.Reason, c.Name == tc.check)
				}
			}
			if tc.check == "" {
				if vols := checkNamed(checks, "volumes"); len(vols.Details) != 1 || !strings.Contains(vols.Details[0], "PersistentVolume pv-"+f.NS) || !strings.Contains(vols.Details[0], "on node "+f.Nodes[0]) {
					t.Errorf("volumes check lists %v, want the PV with its node", vols.Details)
				}
				if c := checkNamed(checks, "agent-version"); c.Verdict != handover.Pass || !strings.Contains(c.Reason, "(version test)") {
					t.Errorf("agent-version is %s (%s), want Pass naming the agents' version", c.Verdict, c.Reason)
				}
				return
			}
			c := checkNamed(checks, tc.check)
			for _, w := range tc.want {
				w = strings.ReplaceAll(w, "NS", f.NS)
				if !strings.Contains(c.Reason+" fix: "+c.Fix, w) {
					t.Errorf("check %s says %q, want it to contain %q", tc.check, c.Reason, w)
				}
			}
			if c.Fix == "" {
				t.Errorf("check %s gives no fix", tc.check)
			}
		})
	}
}

// reviewAs sends access reviews as another user and everything else as the embedded client.
type reviewAs struct {
	client.Client
	as client.Client
}

func (r *reviewAs) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if strings.Contains(typeName(obj), "SubjectAccessReview") {
		return r.as.Create(ctx, obj, opts...)
	}
	return r.Client.Create(ctx, obj, opts...)
}

// oldAgentOn shows node's LVMVolumeGroupNodeStatus as an agent older than the agent facts left it.
// oldAgentOn shows node's LVMVolumeGroupNodeStatus without the node facts an agent that adopts writes;
// with blankVersion, with the facts of an agent whose build set no version.
type oldAgentOn struct {
	client.Client
	node         string
	blankVersion bool
}

func (o *oldAgentOn) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := o.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if l, ok := list.(*lvmv1.LVMVolumeGroupNodeStatusList); ok {
		for i := range l.Items {
			switch {
			case l.Items[i].Name != o.node:
			case o.blankVersion:
				facts, err := lvmv1.ParseNodeFacts(l.Items[i].Annotations)
				if err != nil || facts.Agent == nil {
					return fmt.Errorf("node facts of %s: %v", o.node, err)
				}
				facts.Agent.Version = ""
				l.Items[i].Annotations[lvmv1.NodeFactsAnnotation] = facts.String()
			default:
				delete(l.Items[i].Annotations, lvmv1.NodeFactsAnnotation)
			}
		}
	}
	return nil
}

// An agent that adopts but whose build set no version is named "unknown", not "(version )".
func TestPreflight_AgentWithoutAVersion_IsNamedUnknown(t *testing.T) {
	testenv.Require(t)
	f := newFixture(t, optest.V1Ready)
	p := f.Plan()
	m := f.migrator(&oldAgentOn{Client: f.C, node: f.Nodes[1], blankVersion: true})
	checks, err := m.Preflight(context.Background(), p, handover.PreflightOptions{AcceptLossy: true})
	if err != nil {
		t.Fatal(err)
	}
	if c := checkNamed(checks, "agent-version"); c.Verdict != handover.Pass || !strings.Contains(c.Reason, "(versions test, unknown)") {
		t.Errorf("agent-version is %s (%s), want Pass naming both versions", c.Verdict, c.Reason)
	}
}
