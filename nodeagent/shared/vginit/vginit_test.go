package vginit_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/shared/vginit"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Main(m, &env)) }

// lun plays the shared LUN as the nodes see it: whether the volume group exists, and how often it was
// created.
type lun struct {
	exists  atomic.Bool
	creates atomic.Int32
}

func (l *lun) funcs() vginit.Funcs {
	return vginit.Funcs{
		Exists: func(context.Context) (bool, error) { return l.exists.Load(), nil },
		Create: func(context.Context) error {
			l.creates.Add(1)
			time.Sleep(20 * time.Millisecond) // a vgcreate takes a moment; others must wait meanwhile
			l.exists.Store(true)
			return nil
		},
	}
}

// TestEnsure_OneCreatorAmongMany: ten nodes ensuring the same volume group at once create it once; every
// node learns who created it, and a later call returns without looking at the LUN.
func TestEnsure_OneCreatorAmongMany(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	var l lun
	results := make([]vginit.Result, 10)
	errs := make([]error, 10)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			in := &vginit.Initializer{Client: env.Client, Namespace: ns, Node: fmt.Sprintf("node-%d", i), Poll: 10 * time.Millisecond}
			results[i], errs[i] = in.Ensure(context.Background(), "vgshared", l.funcs())
		})
	}
	wg.Wait()
	if n := l.creates.Load(); n != 1 {
		t.Fatalf("the volume group was created %d times, want once", n)
	}
	creators := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("node-%d: %v", i, errs[i])
		}
		if r.Created {
			creators++
		}
		if r.InitializedBy != results[0].InitializedBy || r.InitializedBy == "" {
			t.Errorf("node-%d says %q created it, node-0 says %q", i, r.InitializedBy, results[0].InitializedBy)
		}
	}
	if creators != 1 {
		t.Errorf("%d nodes say they created it", creators)
	}
	var lease coordinationv1.Lease
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: vginit.Name("vgshared")}, &lease); err != nil {
		t.Fatal(err)
	}
	if lease.Annotations[vginit.InitializedByAnnotation] != results[0].InitializedBy {
		t.Errorf("the Lease records %q", lease.Annotations[vginit.InitializedByAnnotation])
	}
	looked := false
	in := &vginit.Initializer{Client: env.Client, Namespace: ns, Node: "late"}
	r, err := in.Ensure(context.Background(), "vgshared", vginit.Funcs{
		Exists: func(context.Context) (bool, error) { looked = true; return true, nil },
		Create: func(context.Context) error { looked = true; return nil },
	})
	if err != nil || looked || r.InitializedBy != results[0].InitializedBy {
		t.Errorf("a node arriving later: %+v, %v, looked at the LUN: %v", r, err, looked)
	}
}

// partitioned is a node cut off from the API server once dead is set: every write fails.
type partitioned struct {
	client.Client
	dead atomic.Bool
}

var errCutOff = errors.New("cut off from the API server")

func (p *partitioned) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if p.dead.Load() {
		return errCutOff
	}
	return p.Client.Update(ctx, obj, opts...)
}

func (p *partitioned) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if p.dead.Load() {
		return errCutOff
	}
	return p.Client.Patch(ctx, obj, patch, opts...)
}

func (p *partitioned) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if p.dead.Load() {
		return errCutOff
	}
	return p.Client.Create(ctx, obj, opts...)
}

// TestEnsure_HolderDiesMidway: a node that dies while creating the volume group (it stops renewing and
// never finishes) holds up the others only for the Lease's duration; then the next node takes the Lease,
// finds the volume group still missing and creates it.
func TestEnsure_HolderDiesMidway(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	const dur = 60 * time.Second
	var l lun
	aClient := &partitioned{Client: env.Client}
	started := make(chan struct{})
	a := &vginit.Initializer{Client: aClient, Namespace: ns, Node: "a", Duration: dur, Clock: clk}
	aDone := make(chan error, 1)
	go func() {
		_, err := a.Ensure(context.Background(), "vgshared", vginit.Funcs{
			Exists: l.funcs().Exists,
			Create: func(ctx context.Context) error { close(started); <-ctx.Done(); return ctx.Err() },
		})
		aDone <- err
	}()
	<-started
	aClient.dead.Store(true) // a dies: no renewal, no release

	b := &vginit.Initializer{Client: env.Client, Namespace: ns, Node: "b", Duration: dur, Poll: 5 * time.Second, Clock: clk}
	bDone := make(chan vginit.Result, 1)
	bErr := make(chan error, 1)
	go func() {
		r, err := b.Ensure(context.Background(), "vgshared", l.funcs())
		bDone <- r
		bErr <- err
	}()
	var r vginit.Result
	deadline := time.Now().Add(time.Minute) // a guard against a hang, not a timing assertion
	for stepped := time.Duration(0); ; stepped += 5 * time.Second {
		select {
		case r = <-bDone:
		default:
			if time.Now().After(deadline) {
				t.Fatal("b never created the volume group")
			}
			if stepped < dur && l.creates.Load() > 0 {
				t.Fatalf("b created the volume group %s after a's last renewal, before the Lease's %s had passed", stepped, dur)
			}
			clk.Step(5 * time.Second)
			time.Sleep(5 * time.Millisecond)
			continue
		}
		break
	}
	if err := <-bErr; err != nil || !r.Created || r.InitializedBy != "b" {
		t.Fatalf("b: %+v, %v; want b to create it", r, err)
	}
	if n := l.creates.Load(); n != 1 {
		t.Errorf("created %d times", n)
	}
	if err := <-aDone; err == nil {
		t.Error("a, cut off mid-way, reports success")
	}
}

// TestEnsure_FailureFreesTheLease: a node whose vgcreate fails gives the Lease up at once, so the next node
// does not wait for it to expire.
func TestEnsure_FailureFreesTheLease(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	var l lun
	a := &vginit.Initializer{Client: env.Client, Namespace: ns, Node: "a", Clock: clk}
	_, err := a.Ensure(context.Background(), "vgshared", vginit.Funcs{Exists: l.funcs().Exists,
		Create: func(context.Context) error { return errors.New("vgcreate: the LUN carries an xfs signature") }})
	if err == nil || !strings.Contains(err.Error(), "xfs signature") {
		t.Fatalf("a failed create: %v, want the vgcreate error", err)
	}
	b := &vginit.Initializer{Client: env.Client, Namespace: ns, Node: "b", Clock: clk}
	r, err := b.Ensure(context.Background(), "vgshared", l.funcs()) // the fake clock never moves: no waiting
	if err != nil || !r.Created || r.InitializedBy != "b" {
		t.Fatalf("b after a's failure: %+v, %v", r, err)
	}
}
