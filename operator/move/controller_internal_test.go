package move

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	moveapi "github.com/lvms-dev/lvms/api/move"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
)

func lvWith(annotations map[string]string) *topolvmv1.LogicalVolume {
	return &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: "lv", Annotations: annotations}}
}

// A move's target carries the move ID; its source names it last in send-to; any other LogicalVolume is in no
// move, and the LogicalVolume watch lets it pass by.
func TestVolumeMoveID_TargetSourceOrNone(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name        string
		annotations map[string]string
		want        string
	}{
		{"target", map[string]string{moveapi.AnnotationID: "m1"}, "m1"},
		{"source", map[string]string{moveapi.AnnotationSendTo: "node-b/uid-7/m2"}, "m2"},
		{"source naming the ID alone", map[string]string{moveapi.AnnotationSendTo: "m3"}, "m3"},
		{"the ID wins over send-to", map[string]string{moveapi.AnnotationID: "m4", moveapi.AnnotationSendTo: "node-b/uid/m5"}, "m4"},
		{"empty ID, source", map[string]string{moveapi.AnnotationID: "", moveapi.AnnotationSendTo: "node-b/uid/m6"}, "m6"},
		{"none", map[string]string{"other": "x"}, ""},
		{"empty send-to", map[string]string{moveapi.AnnotationSendTo: ""}, ""},
	} {
		lv := lvWith(c.annotations)
		if got := volumeMoveID(lv); got != c.want {
			t.Errorf("%s: move ID %q, want %q", c.name, got, c.want)
		}
		if inMove(lv) != (c.want != "") {
			t.Errorf("%s: watched %v, want %v", c.name, inMove(lv), c.want != "")
		}
	}
}

// The PersistentVolume watch passes a PV with a Record, whatever its phase, and no other.
func TestHasRecord(t *testing.T) {
	t.Parallel()
	with := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationRecord: "{}"}}}
	empty := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationRecord: ""}}}
	other := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{AnnotationMovedFrom: "pv-0"}}}
	if !hasRecord(with) || hasRecord(empty) || hasRecord(other) || hasRecord(&corev1.PersistentVolume{}) {
		t.Fatalf("with %v, empty %v, other %v, none %v", hasRecord(with), hasRecord(empty), hasRecord(other), hasRecord(&corev1.PersistentVolume{}))
	}
}

func recordPV(name string, rec *Record) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{AnnotationRecord: rec.encode()}}}
}

func requestNames(reqs []reconcile.Request) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.String())
	}
	slices.Sort(out)
	return out
}

// An agent's report on a move's LogicalVolume wakes the claim of the active Record with that move ID, and only
// it: not the claim of another move, not one whose move ended, not a PV whose Record cannot be read.
func TestVolumeClaim_MapsAReportToItsMovesClaim(t *testing.T) {
	t.Parallel()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mine := &Record{ID: "m1", Namespace: "team-a", Claim: "db", TargetVolume: targetName("m1"), Phase: moveapi.PhaseCopying}
	other := &Record{ID: "m2", Namespace: "team-b", Claim: "web", TargetVolume: targetName("m2"), Phase: moveapi.PhaseCopying}
	ended := &Record{ID: "m1", Namespace: "team-c", Claim: "old", TargetVolume: targetName("m1"), Phase: moveapi.PhaseDone}
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithIndex(&corev1.PersistentVolume{}, indexRecordID, func(o client.Object) []string {
			return recordKeys(o.(*corev1.PersistentVolume), indexRecordID)
		}).
		WithObjects(recordPV("pv-mine", mine), recordPV("pv-other", other), recordPV("pv-ended", ended),
			&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-bad", Annotations: map[string]string{AnnotationRecord: "{"}}}).
		Build()
	r := &Reconciler{}
	mapf := r.volumeClaim(c)

	got := requestNames(mapf(t.Context(), lvWith(map[string]string{moveapi.AnnotationID: "m1"})))
	if want := []string{"team-a/db"}; !slices.Equal(got, want) {
		t.Errorf("target of m1 wakes %v, want %v", got, want)
	}
	got = requestNames(mapf(t.Context(), lvWith(map[string]string{moveapi.AnnotationSendTo: "node-b/uid/m2"})))
	if want := []string{"team-b/web"}; !slices.Equal(got, want) {
		t.Errorf("source of m2 wakes %v, want %v", got, want)
	}
	if got := mapf(t.Context(), lvWith(map[string]string{moveapi.AnnotationID: "m9"})); len(got) != 0 {
		t.Errorf("a move with no active Record wakes %v", requestNames(got))
	}

	// A Record the index holds but that no longer reads (changed between the index and the map) wakes nothing.
	broken := fake.NewClientBuilder().WithScheme(scheme).
		WithIndex(&corev1.PersistentVolume{}, indexRecordID, func(client.Object) []string { return []string{"m1"} }).
		WithObjects(&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-bad", Annotations: map[string]string{AnnotationRecord: "{"}}},
			&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-none"}},
			recordPV("pv-mine", mine)).
		Build()
	if got, want := requestNames(r.volumeClaim(broken)(t.Context(), lvWith(map[string]string{moveapi.AnnotationID: "m1"}))), []string{"team-a/db"}; !slices.Equal(got, want) {
		t.Errorf("with unreadable Records beside it, the report wakes %v, want %v", got, want)
	}

	// A failed list wakes nothing (and says so in the log).
	failing := fake.NewClientBuilder().WithScheme(scheme).WithObjects(recordPV("pv-mine", mine)).
		WithInterceptorFuncs(interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("the API server is away")
		}}).Build()
	if got := r.volumeClaim(failing)(t.Context(), lvWith(map[string]string{moveapi.AnnotationID: "m1"})); got != nil {
		t.Errorf("a failed list wakes %v", requestNames(got))
	}
}

// A source PV's Record wakes its claim; a PV with none, or with one that does not read, wakes nothing.
func TestRecordClaim(t *testing.T) {
	t.Parallel()
	rec := &Record{ID: "m1", Namespace: "team-a", Claim: "db", TargetVolume: targetName("m1"), Phase: moveapi.PhaseCopying}
	if got, want := requestNames(recordClaim(t.Context(), recordPV("pv", rec))), []string{"team-a/db"}; !slices.Equal(got, want) {
		t.Errorf("wakes %v, want %v", got, want)
	}
	bad := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", Annotations: map[string]string{AnnotationRecord: "{"}}}
	for name, o := range map[string]client.Object{"none": &corev1.PersistentVolume{}, "unreadable": bad, "not a PV": lvWith(nil)} {
		if got := recordClaim(t.Context(), o); got != nil {
			t.Errorf("%s wakes %v", name, requestNames(got))
		}
	}
}

// countingLimiter records what the controller asks of it.
type countingLimiter struct {
	workqueue.TypedRateLimiter[reconcile.Request]
	forgotten, asked int
}

func (l *countingLimiter) Forget(r reconcile.Request) {
	l.forgotten++
	l.TypedRateLimiter.Forget(r)
}

func (l *countingLimiter) When(r reconcile.Request) time.Duration {
	l.asked++
	return l.TypedRateLimiter.When(r)
}

// A move that waits on what sends no event is looked at again later and later; a step that needs no wait, or
// fails, starts the claim's delay afresh and leaves the requeue to the controller (an error backs off there).
func TestBackingOff_WaitsLongerWhileNothingChanges(t *testing.T) {
	t.Parallel()
	lim := &countingLimiter{TypedRateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, time.Minute)}
	var res Result
	var err error
	var seen []types.NamespacedName
	f := backingOff(lim, func(_ context.Context, key types.NamespacedName) (Result, error) {
		seen = append(seen, key)
		return res, err
	})
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "db"}}

	res = Result{Wait: true}
	var delays []time.Duration
	for range 3 {
		out, e := f(t.Context(), req)
		if e != nil {
			t.Fatal(e)
		}
		delays = append(delays, out.RequeueAfter)
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}; !slices.Equal(delays, want) {
		t.Fatalf("waiting: looked again after %v, want %v", delays, want)
	}

	res = Result{}
	if out, e := f(t.Context(), req); e != nil || out.RequeueAfter != 0 || lim.forgotten != 1 {
		t.Fatalf("a step with no wait: %+v, %v, forgotten %d times", out, e, lim.forgotten)
	}
	res = Result{Wait: true}
	if out, _ := f(t.Context(), req); out.RequeueAfter != time.Second {
		t.Fatalf("after a step with no wait, waiting again starts at %v, want 1s", out.RequeueAfter)
	}

	res, err = Result{Wait: true}, errors.New("conflict")
	asked := lim.asked
	if out, e := f(t.Context(), req); !errors.Is(e, err) || out.RequeueAfter != 0 || lim.forgotten != 2 || lim.asked != asked {
		t.Fatalf("a failed step: %+v, %v, forgotten %d, asked for a delay %d times more", out, e, lim.forgotten, lim.asked-asked)
	}
	if len(seen) != 6 || seen[0] != req.NamespacedName {
		t.Fatalf("the step saw %v", seen)
	}
}
