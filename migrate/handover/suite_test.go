package handover_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/migrate/handover"
	"github.com/lvms-dev/lvms/migrate/migratetest"
	"github.com/lvms-dev/lvms/operator/optest"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// errStopped is the injected stop: the process "dies" before this write reaches the API server.
var errStopped = errors.New("injected stop")

// writeCounter counts API writes that reached the API server (a write refused with a conflict changed
// nothing and is retried) and, with limit >= 0, lets only the first limit through.
type writeCounter struct {
	client.Client
	limit, writes int
}

func (w *writeCounter) write(do func() error) error {
	if w.limit >= 0 && w.writes >= w.limit {
		return errStopped
	}
	err := do()
	if !apierrors.IsConflict(err) {
		w.writes++
	}
	return err
}

func (w *writeCounter) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if _, review := obj.(*authv1.SelfSubjectAccessReview); review {
		return w.Client.Create(ctx, obj, opts...) // an access review writes nothing
	}
	return w.write(func() error { return w.Client.Create(ctx, obj, opts...) })
}

func (w *writeCounter) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	return w.write(func() error { return w.Client.Patch(ctx, obj, p, opts...) })
}

func (w *writeCounter) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return w.write(func() error { return w.Client.Update(ctx, obj, opts...) })
}

func (w *writeCounter) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return w.write(func() error { return w.Client.Delete(ctx, obj, opts...) })
}

func (w *writeCounter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	return w.write(func() error { return w.Client.Apply(ctx, obj, opts...) })
}

// fixture is the shared migration fixture with the helpers of these tests.
type fixture struct{ *migratetest.Fixture }

func newFixture(t *testing.T, v1 optest.V1Report) *fixture {
	testenv.Require(t)
	return &fixture{migratetest.New(t, env, v1)}
}

func (f *fixture) migrator(c client.Client) *handover.Migrator {
	return &handover.Migrator{Client: c, Poll: 50 * time.Millisecond, Timeout: optest.DefaultTimeout}
}

func sortedCopy(s []string) []string { out := slices.Clone(s); slices.Sort(out); return out }

func typeName(v any) string { return fmt.Sprintf("%T", v) }
