package movefence_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/lvms-dev/lvms/api/move"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/csinode"
	"github.com/lvms-dev/lvms/nodeagent/movefence"
	"github.com/lvms-dev/lvms/nodeagent/transfer"
	"github.com/lvms-dev/lvms/operator/optest"
)

// TestNew_Defaults: a hold still waiting for a publication to go is looked at again after Recheck, by default
// DefaultRecheck (unpublishing sends no event: without a recheck the move would wait forever); the logger
// given is the one the controller logs to.
func TestNew_Defaults(t *testing.T) {
	testenv.Require(t)
	for _, tc := range []struct {
		recheck, want time.Duration
	}{{0, movefence.DefaultRecheck}, {-time.Second, movefence.DefaultRecheck}, {50 * time.Millisecond, 50 * time.Millisecond}} {
		lv := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: "src", Annotations: map[string]string{move.AnnotationHold: id}},
			Spec: topolvmv1.LogicalVolumeSpec{NodeName: "node-a"}, Status: topolvmv1.LogicalVolumeStatus{VolumeID: "vol-1"}}
		c := fake.NewClientBuilder().WithScheme(env.Scheme).WithObjects(lv).Build()
		f := &fence{held: map[string]string{}, pubs: map[string][]string{"vol-1": {"/pods/uid-1/mount"}}, dir: t.TempDir()}
		var logged []string
		ctl := movefence.New(movefence.Options{NodeName: "node-a", Client: c, Fence: f, Reporter: transfer.APIReporter{Client: c, NodeName: "node-a"},
			Recheck: tc.recheck, Logger: funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{})})
		req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "src"}}
		res, err := ctl.Reconcile(context.Background(), req)
		if err != nil || res.RequeueAfter != tc.want {
			t.Errorf("Recheck %v: a hold waiting for a publication is looked at again after %v (%v), want %v", tc.recheck, res.RequeueAfter, err, tc.want)
		}
		if len(logged) != 0 {
			t.Errorf("logged %q while the volume is still published, want nothing yet", logged)
		}
		f.publish("vol-1") // the pod is gone
		if _, err := ctl.Reconcile(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		if len(logged) != 1 || !strings.Contains(logged[0], "Holding the source of a move") {
			t.Errorf("logged %q to the logger given, want the hold", logged)
		}
	}
}

// TestNew_DefaultBackoff: a verification that failed is tried again after DefaultBackoff's first wait (2 s,
// 10 % jitter), not at once.
func TestNew_DefaultBackoff(t *testing.T) {
	var opens atomic.Int32
	v := startVerifying(t, &opens, func() (io.ReaderAt, int64, io.Closer, error) { return nil, 0, nil, errors.New("device busy") })
	clk := v.clk
	waitTimer := func() {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !clk.HasWaiters(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the failed verification waits for no timer")
			}
		}
	}
	waitTimer()
	clk.Step(1700 * time.Millisecond) // less than 2 s less 10 %
	time.Sleep(100 * time.Millisecond)
	if n := opens.Load(); n != 1 {
		t.Fatalf("%d attempts 1.7 s after the first failed, want 1: the default backoff waits about 2 s", n)
	}
	clk.Step(700 * time.Millisecond) // 2.4 s: past 2 s plus 10 %
	for deadline := time.Now().Add(10 * time.Second); opens.Load() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the verification was not tried again 2.4 s after it failed")
		}
	}
}

// reads records the LogicalVolumes read through it.
type reads struct {
	client.Client
	mu    sync.Mutex
	names []string
}

func (r *reads) Get(ctx context.Context, k client.ObjectKey, o client.Object, opts ...client.GetOption) error {
	r.mu.Lock()
	r.names = append(r.names, k.Name)
	r.mu.Unlock()
	return r.Client.Get(ctx, k, o, opts...)
}

func (r *reads) read(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.names, name)
}

// TestHold_OnlyVolumesUnderAMoveAreReconciled: each node's agent watches every LogicalVolume; only its own
// node's volumes that a move concerns are reconciled — another node's volume under a move and this node's
// volumes no move concerns (created, changed, deleted) are filtered out by the watch, never read (thousands of
// nodes each reading every volume that changes would be the API server's load). A volume left with only an
// answer (the hold ended while the agent was down) is one a move concerns: the answer is cleared.
func TestHold_OnlyVolumesUnderAMoveAreReconciled(t *testing.T) {
	testenv.Require(t)
	ns := env.Namespace(t)
	w := &world{t: t, node: ns + "-a", fence: &fence{held: map[string]string{}, pubs: map[string][]string{}, dir: t.TempDir()}}
	names := []string{ns + "-elsewhere", ns + "-mine", ns + "-plain", ns + "-stale"}
	t.Cleanup(func() {
		for _, name := range names {
			_ = env.Client.Delete(context.Background(), &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
	})
	stale := names[3]
	w.volume(stale, w.node, []byte("data"))
	w.annotate(stale, move.AnnotationHeld, id+":held")

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Logger: logr.Discard(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	must(t, err)
	r := &reads{Client: mgr.GetClient()}
	w.ctl = movefence.New(movefence.Options{NodeName: w.node, Client: r, Fence: w.fence,
		Reporter: transfer.APIReporter{Client: mgr.GetClient(), NodeName: w.node}, Recheck: 50 * time.Millisecond})
	must(t, w.ctl.SetupWithManager(mgr))
	ctx, cancel := context.WithCancel(context.Background())
	optest.Run(t, ctx, cancel, mgr)
	w.await(stale, move.AnnotationHeld, "")

	elsewhere, mine, plain := names[0], names[1], names[2]
	w.volume(elsewhere, w.node+"x", []byte("data"))
	w.annotate(elsewhere, move.AnnotationHold, id)
	w.volume(plain, w.node, []byte("data"))
	w.annotate(plain, "example.com/unrelated", "1")
	must(t, env.Client.Delete(context.Background(), &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: plain}}))
	w.volume(mine, w.node, []byte("data"))
	w.annotate(mine, move.AnnotationHold, id)
	w.await(mine, move.AnnotationHeld, id+":held") // one worker: the events before it were filtered or handled
	for _, name := range []string{elsewhere, plain} {
		if r.read(name) {
			t.Errorf("%s was reconciled (read %v): no move of this node concerns it", name, r.names)
		}
	}
}

// TestHold_RefusalOfAnotherMoveNotReported: the pod refused for an earlier move of the volume is not reported as
// refused for the move holding it now, and a refusal that names no pod reports none.
func TestHold_RefusalOfAnotherMoveNotReported(t *testing.T) {
	testenv.Require(t)
	for _, r := range []csinode.Refusal{{VolumeID: "vol-1", LogicalVolume: "src", MoveID: "fedcba9876543210", Pod: "shop/web-0"},
		{VolumeID: "vol-1", LogicalVolume: "src", MoveID: id}} {
		lv := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: "src", Annotations: map[string]string{move.AnnotationHold: id}},
			Spec: topolvmv1.LogicalVolumeSpec{NodeName: "node-a"}, Status: topolvmv1.LogicalVolumeStatus{VolumeID: "vol-1"}}
		c := fake.NewClientBuilder().WithScheme(env.Scheme).WithObjects(lv).Build()
		f := &fence{held: map[string]string{}, pubs: map[string][]string{}, dir: t.TempDir()}
		ctl := movefence.New(movefence.Options{NodeName: "node-a", Client: c, Fence: f, Reporter: transfer.APIReporter{Client: c, NodeName: "node-a"}})
		ctl.Refused(r)
		if _, err := ctl.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: "src"}}); err != nil {
			t.Fatal(err)
		}
		got := &topolvmv1.LogicalVolume{}
		must(t, c.Get(context.Background(), types.NamespacedName{Name: "src"}, got))
		if v, ok := got.Annotations[move.AnnotationRefusedPod]; ok {
			t.Errorf("refusal %+v: reported %q for move %s, want nothing", r, v, id)
		}
		if got.Annotations[move.AnnotationHeld] != id+":held" {
			t.Errorf("refusal %+v: the hold is answered %q, want held", r, got.Annotations[move.AnnotationHeld])
		}
	}
}

// TestVerify_OncePerMove_AndDoneWhenReported: while a verification of a move's source runs, reconciling again
// starts no second one; once its digest is reported it ends, with no retry waiting.
func TestVerify_OncePerMove_AndDoneWhenReported(t *testing.T) {
	var opens atomic.Int32
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	v := startVerifying(t, &opens, func() (io.ReaderAt, int64, io.Closer, error) {
		<-release // the hash takes its time
		return strings.NewReader("data"), 4, io.NopCloser(nil), nil
	})
	t.Cleanup(unblock) // before the controller's stop: Start waits for the verifications, which wait for release
	ctx, ctl, c, clk := t.Context(), v.ctl, v.client, v.clk
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: "src"}}
	for range 3 {
		if _, err := ctl.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n := opens.Load(); n != 1 {
		t.Fatalf("%d verifications of one move's source at once, want 1", n)
	}
	unblock()
	got := &topolvmv1.LogicalVolume{}
	for deadline := time.Now().Add(10 * time.Second); got.Annotations[move.AnnotationVerified] == ""; time.Sleep(10 * time.Millisecond) {
		must(t, c.Get(ctx, types.NamespacedName{Name: "src"}, got))
		if time.Now().After(deadline) {
			t.Fatal("the digest was never reported")
		}
	}
	if v := got.Annotations[move.AnnotationVerified]; strings.Contains(v, "error") {
		t.Fatalf("verified %q, want the digest", v)
	}
	time.Sleep(100 * time.Millisecond)
	if clk.HasWaiters() || opens.Load() != 1 {
		t.Errorf("after the digest was reported: a retry waits %v, %d hashes; want the verification ended", clk.HasWaiters(), opens.Load())
	}
}

// verifying is a started controller holding LogicalVolume src (volume vol-1) for a move that asks its source
// verified, and a verification already running.
type verifying struct {
	ctl    *movefence.Controller
	client client.Client
	clk    *clocktesting.FakeClock
}

// startVerifying starts a controller whose devices open with open (counted in opens) and reconciles src until
// a verification started (Start has handed the controller its context by then); it is stopped at clean-up.
func startVerifying(t *testing.T, opens *atomic.Int32, open func() (io.ReaderAt, int64, io.Closer, error)) verifying {
	t.Helper()
	testenv.Require(t)
	lv := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: "src", Annotations: map[string]string{move.AnnotationHold: id, move.AnnotationVerify: id}},
		Spec: topolvmv1.LogicalVolumeSpec{NodeName: "node-a"}, Status: topolvmv1.LogicalVolumeStatus{VolumeID: "vol-1"}}
	c := fake.NewClientBuilder().WithScheme(env.Scheme).WithObjects(lv).Build()
	f := &fence{held: map[string]string{}, pubs: map[string][]string{}, dir: t.TempDir()}
	v := verifying{client: c, clk: clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))}
	v.ctl = movefence.New(movefence.Options{NodeName: "node-a", Client: c, Fence: f, Reporter: transfer.APIReporter{Client: c, NodeName: "node-a"},
		Timers: v.clk, Open: func(string) (io.ReaderAt, int64, io.Closer, error) {
			opens.Add(1)
			return open()
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- v.ctl.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(10 * time.Second); opens.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if _, err := v.ctl.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "src"}}); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("no verification started")
		}
	}
	return v
}
