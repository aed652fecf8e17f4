package move_test

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	moveapi "github.com/lvms-dev/lvms/api/move"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator/move"
	"github.com/lvms-dev/lvms/operator/optest"
)

var env *testenv.Env

// Most tests run in parallel, each in a world of its own (namespace, nodes, claim). Two run alone, before
// the others start: TestMove_Wired runs controllers that act on every claim, and
// TestMove_Preflight_RefusesNodesPodsCannotRunOn gives the StorageClass every world uses a topology.
//
// The tests wait on the API server far more than they use the CPU: 16 run at once (unless -parallel says
// otherwise), which halves the package's time on two cores.
func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	_ = flag.Set("test.parallel", "16") // before m.Run parses the command line, which may still set it
	os.Exit(testenv.Main(m, &env))
}

var names = driver.New(false)

// world is one test's claim, its volume on node A, and node B to move to. The test plays the node agents
// (fakeAgents) and kube-controller-manager (fakeKCM); there are none in this control plane.
type world struct {
	t              *testing.T
	ns, nodeA      string
	nodeB, class   string
	claim          types.NamespacedName
	sourcePV       string
	sourceLV       string
	sourceClaimUID types.UID
}

func ctx(t *testing.T) context.Context { return t.Context() }

func newWorld(t *testing.T) *world {
	t.Helper()
	testenv.Require(t)
	ns := env.Namespace(t)
	w := &world{t: t, ns: ns, nodeA: ns + "-a", nodeB: ns + "-b", class: "ssd",
		claim: types.NamespacedName{Namespace: ns, Name: "data"}, sourcePV: "pvc-" + ns, sourceLV: "pvc-" + ns}
	c := env.Client
	for _, n := range []string{w.nodeA, w.nodeB} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Annotations: map[string]string{names.CapacityAnnotation("ssd"): "10737418240"}}}
		must(t, c.Create(ctx(t), node))
		t.Cleanup(func() { _ = c.Delete(context.Background(), node) })
		optest.Ready(t, c, n)
	}
	lv := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: w.sourceLV},
		Spec: topolvmv1.LogicalVolumeSpec{Name: w.sourceLV, NodeName: w.nodeA, Size: resource.MustParse("1Gi"), DeviceClass: "ssd"}}
	must(t, c.Create(ctx(t), lv))
	lv.Status.VolumeID = string(lv.UID)
	must(t, c.Status().Update(ctx(t), lv))
	t.Cleanup(func() { cleanupLVs(w) })

	sc := "lvms-ssd"
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data", Labels: map[string]string{"app": "db"}},
		Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: &sc, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}, VolumeName: w.sourcePV}}
	must(t, c.Create(ctx(t), pvc))
	w.sourceClaimUID = pvc.UID
	fs := corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: w.sourcePV},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete, StorageClassName: sc, VolumeMode: &fs,
			ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: "data", UID: pvc.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: names.Driver(), VolumeHandle: string(lv.UID), FSType: "xfs"}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: names.TopologyKey(), Operator: corev1.NodeSelectorOpIn, Values: []string{w.nodeA}}}}}}},
		}}
	must(t, c.Create(ctx(t), pv))
	t.Cleanup(func() { cleanupPVs(w) })
	pvc.Status.Phase = corev1.ClaimBound
	must(t, c.Status().Update(ctx(t), pvc))
	return w
}

// newMove is a world whose claim asks to move to node B, and a reconciler for it.
func newMove(t *testing.T) (*world, *move.Reconciler) {
	t.Helper()
	w := newWorld(t)
	w.annotate(moveapi.AnnotationToNode, w.nodeB)
	return w, w.reconciler(env.Client)
}

// removeLV deletes a LogicalVolume at once (its finalizers dropped), as an admin who deletes it by hand.
func (w *world) removeLV(name string) {
	w.t.Helper()
	lv := w.lv(name)
	base := lv.DeepCopy()
	lv.Finalizers = nil
	must(w.t, env.Client.Patch(ctx(w.t), lv, client.MergeFrom(base)))
	must(w.t, env.Client.Delete(ctx(w.t), lv))
}

// setLVAnnotation sets one annotation of a LogicalVolume, as an agent or another move would.
func (w *world) setLVAnnotation(name, key, value string) {
	w.t.Helper()
	lv := w.lv(name)
	base := lv.DeepCopy()
	if lv.Annotations == nil {
		lv.Annotations = map[string]string{}
	}
	lv.Annotations[key] = value
	must(w.t, env.Client.Patch(ctx(w.t), lv, client.MergeFrom(base)))
}

func cleanupLVs(w *world) {
	list := &topolvmv1.LogicalVolumeList{}
	_ = env.Client.List(context.Background(), list)
	for i := range list.Items {
		if strings.HasPrefix(list.Items[i].Spec.NodeName, w.ns) {
			_ = env.Client.Delete(context.Background(), &list.Items[i])
		}
	}
}

func cleanupPVs(w *world) {
	list := &corev1.PersistentVolumeList{}
	_ = env.Client.List(context.Background(), list)
	for i := range list.Items {
		if ref := list.Items[i].Spec.ClaimRef; ref != nil && ref.Namespace == w.ns {
			_ = env.Client.Delete(context.Background(), &list.Items[i])
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (w *world) reconciler(c client.Client) *move.Reconciler {
	return &move.Reconciler{Client: c, Reader: env.Client, Names: names}
}

func (w *world) pvc() *corev1.PersistentVolumeClaim {
	w.t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := env.Client.Get(ctx(w.t), w.claim, pvc); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		w.t.Fatal(err)
	}
	return pvc
}

func (w *world) pv(name string) *corev1.PersistentVolume {
	w.t.Helper()
	pv := &corev1.PersistentVolume{}
	if err := env.Client.Get(ctx(w.t), types.NamespacedName{Name: name}, pv); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		w.t.Fatal(err)
	}
	return pv
}

func (w *world) lv(name string) *topolvmv1.LogicalVolume {
	w.t.Helper()
	lv := &topolvmv1.LogicalVolume{}
	if err := env.Client.Get(ctx(w.t), types.NamespacedName{Name: name}, lv); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		w.t.Fatal(err)
	}
	return lv
}

// annotate sets claim annotations as the user (the CLI) does.
func (w *world) annotate(kv ...string) {
	w.t.Helper()
	pvc := w.pvc()
	base := pvc.DeepCopy()
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	for i := 0; i < len(kv); i += 2 {
		pvc.Annotations[kv[i]] = kv[i+1]
	}
	must(w.t, env.Client.Patch(ctx(w.t), pvc, client.MergeFrom(base)))
}

func (w *world) status() moveapi.Status {
	w.t.Helper()
	pvc := w.pvc()
	if pvc == nil {
		return moveapi.Status{}
	}
	st, _, err := moveapi.ParseStatus(pvc)
	must(w.t, err)
	return st
}

// agents plays both node agents: it creates LVs for new LogicalVolumes, holds a volume it is asked to hold
// (unless published says where it is still published), and when told to copy, reports each side's digest
// (srcSum for the sender, dstSum for the receiver; "" reports nothing yet). Asked to verify the source, it
// reports verified ("": srcSum; "-": not yet).
type agents struct{ srcSum, dstSum, published, verified string }

func (a agents) run(w *world) {
	w.t.Helper()
	list := &topolvmv1.LogicalVolumeList{}
	must(w.t, env.Client.List(ctx(w.t), list))
	for i := range list.Items {
		lv := &list.Items[i]
		if !strings.HasPrefix(lv.Spec.NodeName, w.ns) || !lv.DeletionTimestamp.IsZero() {
			continue
		}
		if lv.Status.VolumeID == "" {
			lv.Status.VolumeID = string(lv.UID)
			must(w.t, env.Client.Status().Update(ctx(w.t), lv))
			continue
		}
		answers := map[string]string{}
		if id := lv.Annotations[moveapi.AnnotationHold]; id != "" {
			answers[moveapi.AnnotationHeld] = id + ":" + moveapi.Held
			if a.published != "" {
				answers[moveapi.AnnotationHeld] = id + ":the volume is still published at " + a.published + ": a pod uses it"
			} else if lv.Annotations[moveapi.AnnotationVerify] == id && cmp.Or(a.verified, a.srcSum) != "" && a.verified != "-" {
				answers[moveapi.AnnotationVerified] = id + ":" + cmp.Or(a.verified, a.srcSum)
			}
		} else if lv.Annotations[moveapi.AnnotationHeld] != "" {
			answers[moveapi.AnnotationHeld] = ""
		}
		report := ""
		if to := lv.Annotations[moveapi.AnnotationSendTo]; to != "" && a.srcSum != "" {
			report = to[strings.LastIndex(to, "/")+1:] + ":" + a.srcSum
		}
		if id := lv.Annotations[moveapi.AnnotationID]; id != "" && lv.Annotations[moveapi.AnnotationReceiveFrom] != "" && a.dstSum != "" {
			report = id + ":" + a.dstSum
		}
		if report != "" {
			answers[moveapi.AnnotationSHA256] = report
		}
		base := lv.DeepCopy()
		changed := false
		for k, v := range answers {
			if cur, ok := lv.Annotations[k]; cur == v && (ok || v == "") {
				continue
			}
			changed = true
			if v == "" {
				delete(lv.Annotations, k)
			} else {
				if lv.Annotations == nil {
					lv.Annotations = map[string]string{}
				}
				lv.Annotations[k] = v
			}
		}
		if changed {
			must(w.t, env.Client.Patch(ctx(w.t), lv, client.MergeFrom(base)))
		}
	}
}

// kcm plays kube-controller-manager: a claim being deleted that no pod uses loses its pvc-protection
// finalizer; a claim naming a PV pre-bound to it becomes Bound.
//
// Like the real one it writes what it read: when the operator changed the claim meanwhile (the wired test
// runs them concurrently) the write conflicts and the next call tries again.
func (w *world) kcm() {
	w.t.Helper()
	pvc := w.pvc()
	if pvc == nil {
		return
	}
	if !pvc.DeletionTimestamp.IsZero() {
		pods := &corev1.PodList{}
		must(w.t, env.Client.List(ctx(w.t), pods, client.InNamespace(w.ns)))
		used := false
		for _, p := range pods.Items {
			for _, v := range p.Spec.Volumes {
				used = used || v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == pvc.Name
			}
		}
		if !used && len(pvc.Finalizers) > 0 {
			pvc.Finalizers = nil
			if err := env.Client.Update(ctx(w.t), pvc); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				w.t.Fatal(err)
			}
		}
		return
	}
	if pvc.Status.Phase != corev1.ClaimBound && pvc.Spec.VolumeName != "" {
		if pv := w.pv(pvc.Spec.VolumeName); pv != nil && pv.Spec.ClaimRef != nil && pv.Spec.ClaimRef.UID == pvc.UID {
			pvc.Status.Phase = corev1.ClaimBound
			if err := env.Client.Status().Update(ctx(w.t), pvc); err != nil && !apierrors.IsConflict(err) {
				w.t.Fatal(err)
			}
		}
	}
}

// drive reconciles, with the agents and kube-controller-manager acting between steps, until the claim's
// move shows phase want or steps run out; it checks the invariants after every step.
func (w *world) drive(r *move.Reconciler, a agents, want moveapi.Phase, steps int) error {
	w.t.Helper()
	for range steps {
		_, err := r.Reconcile(ctx(w.t), w.claim)
		w.checkInvariants()
		if err != nil {
			return err
		}
		a.run(w)
		w.kcm()
		w.checkInvariants()
		if w.status().Phase == want {
			return nil
		}
	}
	return errors.New("the move did not reach " + string(want) + "; status: " + w.status().Message)
}

// settle runs steps passes of the reconciler, the agents and kube-controller-manager without drive's
// invariants (for a world a test broke on purpose) and returns the last pass's error.
func (w *world) settle(r *move.Reconciler, a agents, steps int) error {
	w.t.Helper()
	var err error
	for range steps {
		_, err = r.Reconcile(ctx(w.t), w.claim)
		a.run(w)
		w.kcm()
	}
	return err
}

// checkInvariants: at most one PV claims the claim; the source PV and LV exist; while a move is active
// the source PV is Retain; a deleted claim is saved in the record.
func (w *world) checkInvariants() {
	w.t.Helper()
	src := w.pv(w.sourcePV)
	if src == nil {
		w.t.Fatal("the source PersistentVolume is gone")
	}
	if w.lv(w.sourceLV) == nil {
		w.t.Fatal("the source LogicalVolume is gone")
	}
	pvc := w.pvc()
	list := &corev1.PersistentVolumeList{}
	must(w.t, env.Client.List(ctx(w.t), list))
	claiming := 0
	for _, pv := range list.Items {
		ref := pv.Spec.ClaimRef
		if ref == nil || ref.Namespace != w.ns || ref.Name != w.claim.Name {
			continue
		}
		if pvc == nil && ref.UID == "" || pvc != nil && (ref.UID == "" || ref.UID == pvc.UID) {
			claiming++
		}
	}
	if claiming > 1 {
		w.t.Fatalf("%d PersistentVolumes claim %s", claiming, w.claim)
	}
	raw, ok := src.Annotations[move.AnnotationRecord]
	if !ok {
		return
	}
	active := !strings.Contains(raw, `"phase":"Done"`) && !strings.Contains(raw, `"phase":"Aborted"`)
	if active && src.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		w.t.Fatalf("the source PV's reclaim policy is %s during the move", src.Spec.PersistentVolumeReclaimPolicy)
	}
	if pvc == nil && !strings.Contains(raw, `"saved":`) {
		w.t.Fatal("the claim is gone and the record has not saved it")
	}
}
