package testenv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// WaitFor polls done every interval until it holds, and fails the test: at once, with the reason, when one
// of refused names a reason the work can never complete (a benchmark's claims refused for want of space,
// which nothing in a benchmark frees; the process doing the work gone: ProcessEnded); after timeout, with
// done's last state. done's state says how far
// the work got ("12 of 5000 PVs"). A benchmark whose workload is refused thus ends in seconds saying why,
// instead of waiting out a timeout meant for work that proceeds.
func WaitFor(tb testing.TB, interval, timeout time.Duration, done func() (bool, string), refused ...func() string) {
	tb.Helper()
	var state string
	var why refusal
	err := wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, func(context.Context) (bool, error) {
		var ok bool
		if ok, state = done(); ok {
			return true, nil
		}
		for _, r := range refused {
			if reason := r(); reason != "" {
				return false, refusal(reason)
			}
		}
		return false, nil
	})
	switch {
	case err == nil:
	case errors.As(err, &why):
		tb.Fatalf("stopped waiting: this can never complete (%s): %s", state, why)
	default:
		tb.Fatalf("not done after %s: %s", timeout, state)
	}
}

// refusal ends WaitFor's poll with the reason.
type refusal string

func (r refusal) Error() string { return string(r) }

// Refusals are the ProvisioningFailed events of one namespace's claims that no retry heals, as a watch
// delivers them: not enough space, a thin pool past its usage threshold, an invalid request, a missing
// StorageClass or node. The failures the provisioner says it retries (a node agent that did not answer in
// time, an error it retries with backoff) may heal and are not refusals.
type Refusals struct {
	mu    sync.Mutex
	first string
}

// WatchRefusals watches namespace ns's ProvisioningFailed events until the test ends.
func WatchRefusals(tb testing.TB, cfg *rest.Config, ns string) *Refusals {
	tb.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	selector := fields.SelectorFromSet(fields.Set{"reason": "ProvisioningFailed", "involvedObject.kind": "PersistentVolumeClaim"}).String()
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = selector }))
	informer := factory.Core().V1().Events().Informer()
	r := &Refusals{}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    r.see,
		UpdateFunc: func(_, obj any) { r.see(obj) },
	}); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	tb.Cleanup(func() { cancel(); factory.Shutdown() })
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		tb.Fatalf("watch the ProvisioningFailed events of namespace %s: not synced", ns)
	}
	return r
}

func (r *Refusals) see(obj any) {
	e, ok := obj.(*corev1.Event)
	if !ok || Retried(e.Message) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.first == "" {
		r.first = fmt.Sprintf("claim %s/%s: %s", e.InvolvedObject.Namespace, e.InvolvedObject.Name, e.Message)
	}
}

// First is the first refusal seen (the claim and the provisioner's message), "" while there is none.
func (r *Refusals) First() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first
}

// Retried tells whether a ProvisioningFailed message is one the provisioner says it retries by itself
// (operator/provisioner claim_controller.go: a node agent that did not answer within the call's timeout, or
// another error "retried with backoff"), so the failure may heal. Should that wording change, a benchmark
// fails on a failure that would have healed, which is loud; it never waits out a refusal.
func Retried(message string) bool {
	return strings.HasPrefix(message, "Provisioning failed and will be retried") ||
		strings.Contains(message, "provisioning is retried with backoff")
}
