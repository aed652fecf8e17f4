package admission_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/deploy"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator/admission"
)

// TestParse_Refuses: a manifest that is not exactly one policy and its binding of the same name is refused,
// naming the file.
func TestParse_Refuses(t *testing.T) {
	good := string(deploy.AdmissionPolicies[0].Manifest)
	policy, binding, ok := strings.Cut(good, "\n---\n")
	if !ok {
		t.Fatal("the manifest is not two documents")
	}
	name := policies(t)[0].Name
	for what, raw := range map[string]string{
		"not YAML":                    "kind: [",
		"another kind":                "kind: ConfigMap\n",
		"a policy only":               policy,
		"a binding only":              binding,
		"an unknown field":            policy + "\nbogus: 1\n---\n" + binding,
		"an unknown binding field":    policy + "\n---\n" + binding + "\nbogus: 1\n",
		"a binding of another name":   policy + "\n---\n" + strings.Replace(binding, "name: "+name, "name: other", 1),
		"a binding of another policy": policy + "\n---\n" + strings.Replace(binding, "policyName: "+name, "policyName: other", 1),
	} {
		if _, err := admission.Parse("deploy/x.yaml", "x", []byte(raw)); err == nil || !strings.HasPrefix(err.Error(), "deploy/x.yaml: ") {
			t.Errorf("%s: %v, want an error naming the file", what, err)
		}
	}
	p, err := admission.Parse("deploy/x.yaml", "x", []byte(good))
	if err != nil || p.Name != name || p.Manifest != "deploy/x.yaml" || p.Guards != "x" {
		t.Errorf("the manifest itself: %+v, %v", p, err)
	}
}

// unreadable is an API server that answers every read with an error.
type unreadable struct {
	client.Client
	err error
}

func (u unreadable) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return u.err
}

// TestGuard_CannotRead: a guard that cannot read the policies does not take them for in place: Unsafe and
// Problem say so, the metric is set, and Check returns the error for a retry. A name that is not LVMS's
// policy changes nothing.
func TestGuard_CannotRead(t *testing.T) {
	testenv.Require(t)
	removeAll(t)
	ps := policies(t)
	boom := errors.New("connection refused")
	g := admission.NewGuard(unreadable{Client: env.Client, err: boom}, ps)
	if err := g.Check(t.Context(), "someone-elses-policy"); err != nil {
		t.Errorf("another policy: %v", err)
	}
	if g.Problem() != "" {
		t.Errorf("another policy's check raised %q", g.Problem())
	}
	for _, p := range ps {
		if err := g.Check(t.Context(), p.Name); !errors.Is(err, boom) {
			t.Errorf("%s: %v, want the read error", p.Name, err)
		}
		if v := testutil.ToFloat64(admission.Missing.WithLabelValues(p.Name)); v != 1 {
			t.Errorf("lvms_admission_policy_missing{policy=%q} = %v, want 1", p.Name, v)
		}
	}
	for _, want := range []string{"cannot read the admission policy " + ps[0].Name, "connection refused", ps[1].Guards + " is not known to hold"} {
		if !strings.Contains(g.Problem(), want) {
			t.Errorf("Problem says %q; want %q", g.Problem(), want)
		}
	}
}

// TestGuard_RestoresBindings: a binding that is missing, reports instead of denying, or takes a parameter is
// put back as deploy/ has it; Unsafe is clear afterwards.
func TestGuard_RestoresBindings(t *testing.T) {
	testenv.Require(t)
	ps := policies(t)
	p := ps[0]
	for what, change := range map[string]func(b *admv1.ValidatingAdmissionPolicyBinding) bool{
		"deleted": func(*admv1.ValidatingAdmissionPolicyBinding) bool { return false },
		"audit only": func(b *admv1.ValidatingAdmissionPolicyBinding) bool {
			b.Spec.ValidationActions = []admv1.ValidationAction{admv1.Audit}
			return true
		},
		"with a parameter": func(b *admv1.ValidatingAdmissionPolicyBinding) bool {
			b.Spec.ParamRef = &admv1.ParamRef{Name: "x", ParameterNotFoundAction: ptr.To(admv1.AllowAction)}
			return true
		},
		"narrowed to some namespaces": func(b *admv1.ValidatingAdmissionPolicyBinding) bool {
			b.Spec.MatchResources = &admv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: metav1.LabelSelectorOpExists}}}}
			return true
		},
		"narrowed to some resources": func(b *admv1.ValidatingAdmissionPolicyBinding) bool {
			b.Spec.MatchResources = &admv1.MatchResources{ResourceRules: []admv1.NamedRuleWithOperations{{RuleWithOperations: admv1.RuleWithOperations{
				Operations: []admv1.OperationType{admv1.Create}, Rule: admv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}}
			return true
		},
		"narrowed to labelled namespaces": func(b *admv1.ValidatingAdmissionPolicyBinding) bool {
			b.Spec.MatchResources = &admv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}}}
			return true
		},
		"narrowed to some objects by an expression": func(b *admv1.ValidatingAdmissionPolicyBinding) bool {
			b.Spec.MatchResources = &admv1.MatchResources{ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: metav1.LabelSelectorOpExists}}}}
			return true
		},
		"with resources left out": func(b *admv1.ValidatingAdmissionPolicyBinding) bool {
			b.Spec.MatchResources = &admv1.MatchResources{ExcludeResourceRules: []admv1.NamedRuleWithOperations{{RuleWithOperations: admv1.RuleWithOperations{
				Operations: []admv1.OperationType{admv1.Create}, Rule: admv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}}
			return true
		},
	} {
		t.Run(what, func(t *testing.T) {
			removeAll(t)
			g := admission.NewGuard(env.Client, ps)
			must(t, g.Check(t.Context(), p.Name))
			_, b := get(t, p.Name)
			if change(b) {
				must(t, env.Client.Update(t.Context(), b))
			} else {
				must(t, env.Client.Delete(t.Context(), b))
			}
			must(t, g.Check(t.Context(), p.Name))
			_, b = get(t, p.Name)
			if b == nil || b.Spec.ParamRef != nil || len(b.Spec.ValidationActions) != 1 || b.Spec.ValidationActions[0] != admv1.Deny {
				t.Fatalf("binding after the check: %+v", b)
			}
			if m := b.Spec.MatchResources; m != nil && (len(m.ResourceRules) > 0 || len(m.ExcludeResourceRules) > 0 ||
				m.NamespaceSelector != nil && (len(m.NamespaceSelector.MatchExpressions) > 0 || len(m.NamespaceSelector.MatchLabels) > 0) ||
				m.ObjectSelector != nil && (len(m.ObjectSelector.MatchExpressions) > 0 || len(m.ObjectSelector.MatchLabels) > 0)) {
				t.Errorf("the binding is still narrowed: %+v", m)
			}
		})
	}
}

// TestGuard_InPlace_NotWrittenAgain: policies and bindings as deploy/ has them are left alone — also a binding
// whose match resources spell out what narrows nothing (empty selectors, no rules: the API server's
// defaults) — so an idle operator writes nothing.
func TestGuard_InPlace_NotWrittenAgain(t *testing.T) {
	testenv.Require(t)
	removeAll(t)
	ps := policies(t)
	g := admission.NewGuard(env.Client, ps)
	for _, p := range ps {
		must(t, g.Check(t.Context(), p.Name))
	}
	_, b := get(t, ps[0].Name)
	b.Spec.MatchResources = &admv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{}, ObjectSelector: &metav1.LabelSelector{},
		MatchPolicy: ptr.To(admv1.Equivalent)}
	must(t, env.Client.Update(t.Context(), b))
	versions := func() []string {
		var out []string
		for _, p := range ps {
			pol, b := get(t, p.Name)
			out = append(out, pol.ResourceVersion, b.ResourceVersion)
		}
		return out
	}
	before := versions()
	for _, p := range ps {
		must(t, g.Check(t.Context(), p.Name))
	}
	if after := versions(); !slices.Equal(before, after) {
		t.Errorf("resource versions %v after checking policies in place, %v before: the guard wrote them again", after, before)
	}
	if u := g.Unsafe(); u != "" {
		t.Errorf("Unsafe says %q with every policy in place", u)
	}
}

// flaky answers reads with err while it is set.
type flaky struct {
	client.Client
	err *error
}

func (f flaky) Get(ctx context.Context, k client.ObjectKey, o client.Object, opts ...client.GetOption) error {
	if *f.err != nil {
		return *f.err
	}
	return f.Client.Get(ctx, k, o, opts...)
}

// TestGuard_TellsWhenTheAnswerChanges: subscribers (the move and shared-volume controllers) get an event and the
// log a line when a policy stops being in place, an event when it is back, and nothing while the answer stays.
func TestGuard_TellsWhenTheAnswerChanges(t *testing.T) {
	testenv.Require(t)
	removeAll(t)
	ps := policies(t)
	var readErr error
	g := admission.NewGuard(flaky{Client: env.Client, err: &readErr}, ps)
	var logged []string
	g.Log = funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})
	events := g.Subscribe()
	pending := func() int {
		n := 0
		for {
			select {
			case <-events:
				n++
			default:
				return n
			}
		}
	}
	name := ps[0].Name
	check := func() { _ = g.Check(t.Context(), name) }

	check() // first look: in place (created, which is logged)
	if n := pending(); n != 1 {
		t.Errorf("%d events after the first look, want 1", n)
	}
	logged = nil
	check()
	if n, l := pending(), len(logged); n != 0 || l != 0 {
		t.Errorf("%d events and %d log lines while the policy stayed in place, want none", n, l)
	}
	readErr = errors.New("connection refused")
	check()
	if n := pending(); n != 1 || len(logged) != 1 || !strings.Contains(logged[0], name) || !strings.Contains(logged[0], "connection refused") {
		t.Errorf("%d events, log %q once the policy could not be read; want one event and a line naming the policy and why", n, logged)
	}
	check()
	if n, l := pending(), len(logged); n != 0 || l != 1 {
		t.Errorf("%d events, %d log lines while the problem stayed the same, want no more", n, l)
	}
	readErr = nil
	check()
	if n, l := pending(), len(logged); n != 1 || l != 1 {
		t.Errorf("%d events, %d log lines once the policy was back, want one event and no new line", n, l)
	}
}
