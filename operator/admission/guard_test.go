package admission_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/lvms-dev/lvms/deploy"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator/admission"
	"github.com/lvms-dev/lvms/operator/optest"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(testenv.Main(m, &env))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func policies(t *testing.T) []admission.Policy {
	t.Helper()
	var out []admission.Policy
	for _, m := range deploy.AdmissionPolicies {
		p, err := admission.Parse(m.File, m.Guards, m.Manifest)
		must(t, err)
		out = append(out, p)
	}
	return out
}

// removeAll deletes LVMS's policies and bindings (cluster-scoped: every test starts and ends without them).
func removeAll(t *testing.T) {
	t.Helper()
	testenv.Require(t)
	clean := func() {
		for _, p := range policies(t) {
			_ = env.Client.Delete(context.Background(), &admv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: p.Name}})
			_ = env.Client.Delete(context.Background(), &admv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: p.Name}})
		}
	}
	clean()
	t.Cleanup(clean)
}

func get(t *testing.T, name string) (*admv1.ValidatingAdmissionPolicy, *admv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	testenv.Require(t)
	p, b := &admv1.ValidatingAdmissionPolicy{}, &admv1.ValidatingAdmissionPolicyBinding{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, p); apierrors.IsNotFound(err) {
		p = nil
	} else {
		must(t, err)
	}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, b); apierrors.IsNotFound(err) {
		b = nil
	} else {
		must(t, err)
	}
	return p, b
}

// Missing policies are created as deploy/ has them; until the guard looked, moves wait (Unsafe) but no
// condition is raised (Problem).
func TestGuard_CreatesMissingPolicies(t *testing.T) {
	testenv.Require(t)
	removeAll(t)
	ps := policies(t)
	g := admission.NewGuard(env.Client, ps)
	if g.Unsafe() == "" || g.Problem() != "" {
		t.Fatalf("before the first look: Unsafe %q (want a reason), Problem %q (want none)", g.Unsafe(), g.Problem())
	}
	for _, p := range ps {
		must(t, g.Check(t.Context(), p.Name))
	}
	if u := g.Unsafe(); u != "" {
		t.Fatalf("after creating the policies Unsafe says %q", u)
	}
	for _, p := range ps {
		pol, b := get(t, p.Name)
		if pol == nil || b == nil || len(pol.Spec.Validations) != len(p.Policy.Spec.Validations) || b.Spec.PolicyName != p.Name {
			t.Fatalf("policy %s: %v, binding %v", p.Name, pol, b)
		}
		if v := testutil.ToFloat64(admission.Missing.WithLabelValues(p.Name)); v != 0 {
			t.Errorf("lvms_admission_policy_missing{policy=%q} = %v, want 0", p.Name, v)
		}
	}
}

// A policy someone weakened (a validation removed) or a binding narrowed (an object selector) is restored;
// one that is as deploy/ has it is not written.
func TestGuard_RestoresChangedPolicies(t *testing.T) {
	testenv.Require(t)
	removeAll(t)
	ps := policies(t)
	g := admission.NewGuard(env.Client, ps)
	p := ps[0]
	must(t, g.Check(t.Context(), p.Name))
	pol, b := get(t, p.Name)
	rv := pol.ResourceVersion
	must(t, g.Check(t.Context(), p.Name))
	if again, _ := get(t, p.Name); again.ResourceVersion != rv {
		t.Fatal("a policy as deploy/ has it was written again")
	}

	pol.Spec.Validations = pol.Spec.Validations[:1]
	must(t, env.Client.Update(t.Context(), pol))
	b.Spec.MatchResources = &admv1.MatchResources{ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"never": "matches"}}}
	must(t, env.Client.Update(t.Context(), b))
	must(t, g.Check(t.Context(), p.Name))
	must(t, g.Check(t.Context(), p.Name)) // the binding, once the policy is right again
	pol, b = get(t, p.Name)
	if len(pol.Spec.Validations) != len(p.Policy.Spec.Validations) {
		t.Errorf("the weakened policy has %d validations after the check, want %d", len(pol.Spec.Validations), len(p.Policy.Spec.Validations))
	}
	if m := b.Spec.MatchResources; m != nil && m.ObjectSelector != nil && len(m.ObjectSelector.MatchLabels) > 0 {
		t.Errorf("the narrowed binding keeps its selector %v", m.ObjectSelector)
	}
}

// An operator that may not create the policies says exactly what to apply, sets the metric, tells its
// subscribers, and refuses nothing it does not have to: once the policy is applied by hand all is well.
func TestGuard_CannotCreate_SaysWhatToApply(t *testing.T) {
	testenv.Require(t)
	removeAll(t)
	ps := policies(t)
	reader := restricted(t, "lvms-test-reader")
	g := admission.NewGuard(reader, ps)
	events := g.Subscribe()
	p := ps[0]
	must(t, g.Check(t.Context(), p.Name))
	u := g.Unsafe()
	for _, want := range []string{"the admission policy " + p.Name + " is missing and the operator cannot restore it", "apply deploy/nodeagent/admissionpolicy.yaml (kubectl apply -f deploy/nodeagent/admissionpolicy.yaml)", p.Guards + " is not enforced"} {
		if !strings.Contains(u, want) {
			t.Errorf("Unsafe says %q; want %q", u, want)
		}
	}
	if g.Problem() == "" {
		t.Error("Problem says nothing for the conditions")
	}
	if v := testutil.ToFloat64(admission.Missing.WithLabelValues(p.Name)); v != 1 {
		t.Errorf("lvms_admission_policy_missing{policy=%q} = %v, want 1", p.Name, v)
	}
	select {
	case <-events:
	default:
		t.Error("the subscribers were not told")
	}
	for _, o := range []client.Object{p.Policy.DeepCopy(), p.Binding.DeepCopy()} {
		must(t, env.Client.Create(t.Context(), o))
	}
	for _, q := range ps {
		if q.Name != p.Name {
			for _, o := range []client.Object{q.Policy.DeepCopy(), q.Binding.DeepCopy()} {
				must(t, env.Client.Create(t.Context(), o))
			}
		}
		must(t, g.Check(t.Context(), q.Name))
	}
	if u := g.Unsafe(); u != "" {
		t.Fatalf("with the policies applied by hand Unsafe says %q", u)
	}
}

// restricted is a client of user name, who may only read policies and bindings.
func restricted(t *testing.T, name string) client.Client {
	t.Helper()
	testenv.Require(t)
	env.Grant(t, name, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}, rbacv1.PolicyRule{APIGroups: []string{admv1.GroupName},
		Resources: []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"}, Verbs: []string{"get", "list", "watch"}})
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	must(t, err)
	return c
}

// Run as the operator runs it, the guard creates the policies at start and puts back one that is deleted.
func TestGuard_Controller_PutsBackADeletedPolicy(t *testing.T) {
	testenv.Require(t)
	removeAll(t)
	ps := policies(t)
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Logger: logr.Discard(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	must(t, err)
	g := admission.NewGuard(mgr.GetClient(), ps)
	must(t, g.SetupWithManager(mgr))
	ctx, cancel := context.WithCancel(context.Background())
	optest.Run(t, ctx, cancel, mgr)
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 30s (Unsafe: %q)", what, g.Unsafe())
			}
		}
	}
	eventually("both policies created at start", func() bool { return g.Unsafe() == "" })
	must(t, env.Client.Delete(t.Context(), &admv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: ps[0].Name}}))
	eventually("the deleted binding put back", func() bool {
		_, b := get(t, ps[0].Name)
		return b != nil
	})
}
