package deploy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	lvmv1 "github.com/lvms-dev/lvms/api/lvm/v1alpha1"
	lvmv2 "github.com/lvms-dev/lvms/api/lvm/v2alpha1"
	"github.com/lvms-dev/lvms/api/topolvm/driver"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/operator/names"
	"github.com/lvms-dev/lvms/operator/optest"
)

const nodeNameExtra = "authentication.kubernetes.io/node-name"

// installOverlay creates every object of the plain Kubernetes overlay but the operator's Deployment.
func installOverlay(t *testing.T) string {
	t.Helper()
	testenv.Require(t)
	for _, o := range render(t, "overlays/kubernetes") {
		if o.GetKind() == "Deployment" {
			continue
		}
		if err := env.Client.Create(context.Background(), o.DeepCopy()); client.IgnoreAlreadyExists(err) != nil {
			t.Fatalf("create %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	return "lvms-system"
}

// agentClient returns a client with the token the kubelet would mount into a node agent pod on node: a
// bound service account token of lvms-node-agent for a pod with spec.nodeName set (the API server adds
// the node's name to the token's user). An empty node gives a token bound to no pod.
func agentClient(t *testing.T, ns, node string) client.Client {
	t.Helper()
	testenv.Require(t)
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	req := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(600))}}
	if node != "" {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: names.NodeAgent + "-", Namespace: ns},
			Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: names.NodeAgent, AutomountServiceAccountToken: ptr(false),
				Containers: []corev1.Container{{Name: "node-agent", Image: "lvms"}}},
		}
		if err := env.Client.Create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), pod) })
		req.Spec.BoundObjectRef = &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, names.NodeAgent, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for the node agent on %q: %v", node, err)
	}
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tok.Status.Token
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// The API server must have put the node into the token's user, as in a real pod.
	review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := review.Status.UserInfo.Extra[nodeNameExtra]; node != "" && (len(got) != 1 || got[0] != node) {
		t.Fatalf("the bound token's user has %s = %v, want [%s]", nodeNameExtra, got, node)
	}
	return c
}

func ptr[T any](v T) *T { return &v }

// TestNodeAgent_WritesOnlyItsOwnNode runs as the node agent of node A with a real bound token and the
// installed RBAC and ValidatingAdmissionPolicy: it may write its own LVMNode's and LogicalVolume's status and
// finalizers, its Node's annotations and its node status, and is refused for node B's, for any spec change,
// and when its token names no node.
func TestNodeAgent_WritesOnlyItsOwnNode(t *testing.T) {
	testenv.Require(t)
	ctx := context.Background()
	ns := installOverlay(t)
	nodeA, nodeB := "agent-node-a", "agent-node-b"
	for _, n := range []string{nodeA, nodeB} {
		optest.Node(t, env.Client, n, nil)
	}
	lvmNode := func(n string) *lvmv2.LVMNode {
		o := &lvmv2.LVMNode{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}}
		if err := env.Client.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
		return o
	}
	lv := func(n string) *topolvmv1.LogicalVolume {
		o := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: "lv-" + n},
			Spec: topolvmv1.LogicalVolumeSpec{Name: "lv-" + n, NodeName: n, Size: resource.MustParse("1Gi")}}
		if err := env.Client.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
		return o
	}
	// A shared volume has no node; the operator names the node that does its work.
	sharedLV := func(worker string) *topolvmv1.LogicalVolume {
		o := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: "shared-lv-" + worker, Annotations: map[string]string{
			driver.SharedVolumeGroupAnnotation: "san", driver.SharedWorkerAnnotation: worker}},
			Spec: topolvmv1.LogicalVolumeSpec{Name: "shared-lv-" + worker, Size: resource.MustParse("1Gi")}}
		if err := env.Client.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
		return o
	}
	moveWorker := func(o *topolvmv1.LogicalVolume, to string) func(client.Client) error {
		return func(c client.Client) error {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, driver.SharedWorkerAnnotation, to)
			return c.Patch(ctx, o.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(patch)))
		}
	}
	vg := &lvmv1.LVMVolumeGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent-vg"}}
	if err := env.Client.Create(ctx, vg); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	agent := agentClient(t, ns, nodeA)

	type write struct {
		name    string
		do      func(c client.Client) error
		allowed bool
		msg     string // in the refusal
	}
	statusOf := func(o *lvmv2.LVMNode) func(client.Client) error {
		return func(c client.Client) error {
			cur := &lvmv2.LVMNode{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
				return err
			}
			base := cur.DeepCopy()
			cur.Status.ObservedGeneration = cur.Generation
			cur.Status.Conditions = []metav1.Condition{{Type: "Probe", Status: metav1.ConditionTrue, Reason: "Test", LastTransitionTime: metav1.Now()}}
			return c.Status().Patch(ctx, cur, client.MergeFrom(base))
		}
	}
	lvStatus := func(o *topolvmv1.LogicalVolume) func(client.Client) error {
		return func(c client.Client) error {
			cur := &topolvmv1.LogicalVolume{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
				return err
			}
			base := cur.DeepCopy()
			cur.Status.VolumeID = string(cur.UID)
			return c.Status().Patch(ctx, cur, client.MergeFrom(base))
		}
	}
	group := func(n string) *topolvmv1.LogicalVolumeGroupSnapshot {
		o := &topolvmv1.LogicalVolumeGroupSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "group-" + n},
			Spec: topolvmv1.LogicalVolumeGroupSnapshotSpec{NodeName: n, Members: []topolvmv1.GroupSnapshotMember{{Source: "lv-" + n, Snapshot: "snap-" + n}}}}
		if err := env.Client.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
		return o
	}
	groupStatus := func(o *topolvmv1.LogicalVolumeGroupSnapshot) func(client.Client) error {
		return func(c client.Client) error {
			cur := &topolvmv1.LogicalVolumeGroupSnapshot{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
				return err
			}
			base := cur.DeepCopy()
			cur.Status.Phase = topolvmv1.GroupSnapshotReady
			return c.Status().Patch(ctx, cur, client.MergeFrom(base))
		}
	}
	finalizer := func(o client.Object, fin string) func(client.Client) error {
		return func(c client.Client) error {
			cur := o.DeepCopyObject().(client.Object)
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
				return err
			}
			base := cur.DeepCopyObject().(client.Object)
			controllerutil.AddFinalizer(cur, fin)
			return c.Patch(ctx, cur, client.MergeFrom(base))
		}
	}
	nodeMeta := func(n, field string) func(client.Client) error {
		return func(c client.Client) error {
			patch := fmt.Sprintf(`{"metadata":{%q:{"capacity.topolvm.io/probe":"1"}}}`, field)
			return c.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, client.RawPatch("application/merge-patch+json", []byte(patch)))
		}
	}
	vgAnnotation := func(key string) func(client.Client) error {
		return func(c client.Client) error {
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"{}"}}}`, key)
			return c.Patch(ctx, vg.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(patch)))
		}
	}
	nodeStatus := func(n string) func(client.Client) error {
		return func(c client.Client) error {
			return c.Create(ctx, &lvmv1.LVMVolumeGroupNodeStatus{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: n}})
		}
	}
	lvmNodeSpec := func(o *lvmv2.LVMNode) func(client.Client) error {
		return func(c client.Client) error {
			cur := &lvmv2.LVMNode{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(o), cur); err != nil {
				return err
			}
			base := cur.DeepCopy()
			cur.Spec.LVMD = &lvmv2.LVMDConfig{SocketName: "/run/evil.sock"}
			return c.Patch(ctx, cur, client.MergeFrom(base))
		}
	}
	lease := func(name, holder string) func(client.Client) error {
		return func(c client.Client) error {
			return c.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}})
		}
	}
	setHolder := func(name, holder string) func(client.Client) error {
		return func(c client.Client) error {
			cur := &coordinationv1.Lease{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cur); err != nil {
				return err
			}
			cur.Spec.HolderIdentity = &holder
			return c.Update(ctx, cur)
		}
	}
	if err := lease("lvms-host-id-3", nodeB)(env.Client); err != nil { // node B's, gone stale
		t.Fatal(err)
	}
	asHolder := "only as its holder"
	another := "another node"
	writes := []write{
		{name: "its host-ID Lease", do: lease("lvms-host-id-1", nodeA), allowed: true},
		{name: "its volume group creation Lease", do: lease("lvms-vginit-vgshared", nodeA), allowed: true},
		{name: "taking over node B's stale host ID", do: setHolder("lvms-host-id-3", nodeA), allowed: true},
		{name: "a host-ID Lease for node B", do: lease("lvms-host-id-2", nodeB), msg: asHolder},
		{name: "giving its host ID to node B", do: setHolder("lvms-host-id-1", nodeB), msg: asHolder},
		{name: "a Lease that is not the shared volume groups'", do: lease("kube-scheduler", nodeA), msg: asHolder},
		{name: "its LVMNode's status", do: statusOf(lvmNode(nodeA)), allowed: true},
		{name: "its LVMNode's finalizer", do: finalizer(lvmNode(nodeA), "lvm.topolvm.io/node-agent"), allowed: true},
		{name: "its LogicalVolume's status", do: lvStatus(lv(nodeA)), allowed: true},
		{name: "its LogicalVolumeGroupSnapshot's status", do: groupStatus(group(nodeA)), allowed: true},
		{name: "its LogicalVolume's finalizer", do: finalizer(lv(nodeA), "topolvm.io/logicalvolume"), allowed: true},
		{name: "the status of a shared LogicalVolume it works on", do: lvStatus(sharedLV(nodeA)), allowed: true},
		{name: "the finalizer of a shared LogicalVolume it works on", do: finalizer(sharedLV(nodeA), "topolvm.io/logicalvolume"), allowed: true},
		{name: "the status of a shared LogicalVolume node B works on", do: lvStatus(sharedLV(nodeB)), msg: "only while its annotation shared.lvm.topolvm.io/worker names that node"},
		{name: "taking node B's shared LogicalVolume", do: moveWorker(sharedLV(nodeB), nodeA), msg: "only while its annotation"},
		{name: "handing its shared LogicalVolume to node B", do: moveWorker(sharedLV(nodeA), nodeB), msg: "may not change its annotations"},
		{name: "its Node's annotations", do: nodeMeta(nodeA, "annotations"), allowed: true},
		{name: "its node status", do: nodeStatus(nodeA), allowed: true},
		{name: "its finalizer on an LVMVolumeGroup", do: finalizer(vg, "cleanup.vgmanager.node.topolvm.io/"+nodeA), allowed: true},
		{name: "its wipe annotation on an LVMVolumeGroup", do: vgAnnotation("wiped.lvm.topolvm.io/" + nodeA), allowed: true},
		{name: "node B's LVMNode status", do: statusOf(lvmNode(nodeB)), msg: another},
		{name: "node B's LVMNode finalizer", do: finalizer(lvmNode(nodeB), "lvm.topolvm.io/node-agent"), msg: another},
		{name: "node B's LogicalVolume status", do: lvStatus(lv(nodeB)), msg: "may not write LogicalVolume lv-" + nodeB + " of node " + nodeB},
		{name: "node B's LogicalVolumeGroupSnapshot status", do: groupStatus(group(nodeB)), msg: "may not write LogicalVolumeGroupSnapshot group-" + nodeB + " of node " + nodeB},
		{name: "node B's LogicalVolume finalizer", do: finalizer(lv(nodeB), "topolvm.io/logicalvolume"), msg: "of node " + nodeB},
		{name: "node B's Node annotations", do: nodeMeta(nodeB, "annotations"), msg: another},
		{name: "node B's node status", do: nodeStatus(nodeB), msg: another},
		{name: "node B's finalizer on an LVMVolumeGroup", do: finalizer(vg, "cleanup.vgmanager.node.topolvm.io/"+nodeB), msg: "only its own finalizer"},
		{name: "node B's wipe annotation on an LVMVolumeGroup", do: vgAnnotation("wiped.lvm.topolvm.io/" + nodeB), msg: "only its own finalizer and wipe annotation"},
		{name: "its Node's labels", do: nodeMeta(nodeA, "labels"), msg: "labels of its Node"},
		{name: "its LVMNode's spec", do: lvmNodeSpec(lvmNode(nodeA)), msg: "specs are read-only"},
	}
	// The policy takes effect a moment after it is created: wait until the first refusal shows.
	optest.Eventually(t, "the admission policy refuses node B's LVMNode status", func() (bool, string) {
		err := statusOf(lvmNode(nodeB))(agent)
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), another), fmt.Sprint(err)
	})
	for _, w := range writes {
		err := w.do(agent)
		switch {
		case w.allowed && err != nil:
			t.Errorf("the node agent of %s may write %s: %v", nodeA, w.name, err)
		case !w.allowed && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), w.msg)):
			t.Errorf("the node agent of %s writing %s: got %v, want a refusal saying %q", nodeA, w.name, err, w.msg)
		}
	}

	// A token that names no node writes nothing, not even "its own" objects.
	unbound := agentClient(t, ns, "")
	if err := statusOf(lvmNode(nodeA))(unbound); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "has no node bound into its token") {
		t.Errorf("a node agent token bound to no node: got %v, want a refusal", err)
	}
}
