package admission

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/lvms-dev/lvms/operator/names"
)

// Missing is the gauge behind the LVMSAdmissionPolicyMissing alert: 1 while a policy is missing or changed and
// the operator cannot restore it.
var Missing = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "lvms_admission_policy_missing",
	Help: "1 while an admission policy LVMS needs (label policy) is missing or changed and the operator cannot create or restore it: node agents are not confined to their own node, or move requests are not limited to who may delete the claim; LVMS refuses volume moves and new shared volumes meanwhile.",
}, []string{"policy"})

// notChecked is what Unsafe says before the first look.
const notChecked = "the operator has not checked its admission policies yet"

// Guard keeps the policies in place and says whether they are. It runs on the elected operator only; until
// it has looked, Unsafe says so (moves wait) and Problem says nothing (no condition flaps at start).
type Guard struct {
	client   client.Client
	policies []Policy
	// Log is where a policy found missing or changed is logged (ctrl.Log's "admission" by default).
	Log logr.Logger

	mu       sync.Mutex
	problems map[string]string // policy name → what is wrong; absent until checked
	subs     []chan event.GenericEvent
}

// NewGuard returns a Guard of policies that writes with c.
func NewGuard(c client.Client, policies []Policy) *Guard {
	return &Guard{client: c, policies: policies, Log: ctrl.Log.WithName("admission"), problems: map[string]string{}}
}

// Unsafe says why volume moves and new shared volumes are off; "" while every policy is in place.
func (g *Guard) Unsafe() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	unchecked := false
	for _, p := range g.policies {
		problem, checked := g.problems[p.Name]
		unchecked = unchecked || !checked
		if problem != "" {
			out = append(out, problem)
		}
	}
	if len(out) == 0 && unchecked {
		return notChecked
	}
	return strings.Join(out, "; ")
}

// Problem is Unsafe for the LVMNodeSets' and LVMClusters' conditions: "" also before the first look.
func (g *Guard) Problem() string {
	if u := g.Unsafe(); u != notChecked {
		return u
	}
	return ""
}

// Subscribe returns a channel that gets an event whenever Unsafe's answer changes; a controller watches it
// (source.Channel) to look at its objects again.
func (g *Guard) Subscribe() <-chan event.GenericEvent {
	g.mu.Lock()
	defer g.mu.Unlock()
	ch := make(chan event.GenericEvent, 1)
	g.subs = append(g.subs, ch)
	return ch
}

// SetupWithManager runs the guard: it looks at each policy at start and whenever the policy or its binding
// changes or goes. A cluster without ValidatingAdmissionPolicy (before Kubernetes 1.30) cannot be guarded:
// Unsafe says so from the start.
func (g *Guard) SetupWithManager(mgr ctrl.Manager) error {
	if _, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: admv1.GroupName, Kind: "ValidatingAdmissionPolicy"}, "v1"); err != nil {
		for _, p := range g.policies {
			g.set(p.Name, fmt.Sprintf("this cluster's API server does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy (Kubernetes 1.30 or later does), so %s cannot hold: %s is not enforced", p.Name, p.Guards))
		}
		return nil
	}
	names := map[string]bool{}
	for _, p := range g.policies {
		names[p.Name] = true
	}
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool { return names[o.GetName()] })
	start := make(chan event.GenericEvent, len(g.policies))
	for _, p := range g.policies {
		start <- event.GenericEvent{Object: p.Policy.DeepCopy()}
	}
	return ctrl.NewControllerManagedBy(mgr).Named("admission").
		For(&admv1.ValidatingAdmissionPolicy{}, builder.WithPredicates(ours)).
		Watches(&admv1.ValidatingAdmissionPolicyBinding{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(ours)).
		WatchesRawSource(source.Channel(start, &handler.EnqueueRequestForObject{})).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, g.Check(ctx, req.Name)
		}))
}

// Check looks at policy name and its binding, restores them when they are missing or changed, and records
// what is wrong when it cannot. The error is for the controller's retry; the problem is recorded either way.
func (g *Guard) Check(ctx context.Context, name string) error {
	i := slices.IndexFunc(g.policies, func(p Policy) bool { return p.Name == name })
	if i < 0 {
		return nil
	}
	p := g.policies[i]
	wrong, err := g.differs(ctx, p)
	if err != nil {
		g.set(p.Name, fmt.Sprintf("cannot read the admission policy %s (%v): %s is not known to hold", p.Name, err, p.Guards))
		return err
	}
	if wrong == "" {
		g.set(p.Name, "")
		return nil
	}
	for _, obj := range []client.Object{p.Policy.DeepCopy(), p.Binding.DeepCopy()} {
		if err := g.restore(ctx, obj); err != nil {
			g.set(p.Name, fmt.Sprintf("the admission policy %s %s and the operator cannot restore it (%v): %s is not enforced; apply %s (kubectl apply -f %s), or give the operator create and update on validatingadmissionpolicies and validatingadmissionpolicybindings",
				p.Name, wrong, err, p.Guards, p.Manifest, p.Manifest))
			if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
				return nil // nothing a retry changes; the policy's next change looks again
			}
			return err
		}
	}
	g.Log.Info("Restored an admission policy LVMS needs", "policy", p.Name, "was", wrong)
	g.set(p.Name, "")
	return nil
}

// restore creates want, or replaces the spec of the object of its name by want's: a field someone added (a
// selector that narrows a binding) goes too, which an apply of LVMS's fields would leave.
func (g *Guard) restore(ctx context.Context, want client.Object) error {
	cur := want.DeepCopyObject().(client.Object)
	if err := g.client.Get(ctx, client.ObjectKeyFromObject(want), cur); apierrors.IsNotFound(err) {
		return g.client.Create(ctx, want, client.FieldOwner(names.FieldOwner))
	} else if err != nil {
		return err
	}
	switch w := want.(type) {
	case *admv1.ValidatingAdmissionPolicy:
		cur.(*admv1.ValidatingAdmissionPolicy).Spec = w.Spec
	case *admv1.ValidatingAdmissionPolicyBinding:
		cur.(*admv1.ValidatingAdmissionPolicyBinding).Spec = w.Spec
	}
	return g.client.Update(ctx, cur, client.FieldOwner(names.FieldOwner))
}

// differs says how the policy or its binding differ from p ("" when both are as p says).
func (g *Guard) differs(ctx context.Context, p Policy) (string, error) {
	pol := &admv1.ValidatingAdmissionPolicy{}
	if err := g.client.Get(ctx, types.NamespacedName{Name: p.Name}, pol); apierrors.IsNotFound(err) {
		return "is missing", nil
	} else if err != nil {
		return "", err
	}
	if !samePolicy(p.Policy, pol) {
		return "was changed", nil
	}
	b := &admv1.ValidatingAdmissionPolicyBinding{}
	if err := g.client.Get(ctx, types.NamespacedName{Name: p.Name}, b); apierrors.IsNotFound(err) {
		return "has no binding", nil
	} else if err != nil {
		return "", err
	}
	if !sameBinding(p.Binding, b) {
		return "has a changed binding", nil
	}
	return "", nil
}

// set records policy name's problem, and tells the metric and the subscribers when the answer changed.
func (g *Guard) set(name, problem string) {
	g.mu.Lock()
	old, checked := g.problems[name]
	g.problems[name] = problem
	subs := g.subs
	g.mu.Unlock()
	v := 0.0
	if problem != "" {
		v = 1
	}
	Missing.WithLabelValues(name).Set(v)
	if checked && old == problem {
		return
	}
	if problem != "" {
		g.Log.Info("An admission policy LVMS needs is not in place: volume moves and new shared volumes are refused", "policy", name, "problem", problem)
	}
	for _, ch := range subs {
		select {
		case ch <- event.GenericEvent{Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name}}}:
		default: // one pending event is enough: the subscriber reads the current answer
		}
	}
}
