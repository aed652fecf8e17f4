package movefence_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/lvms-dev/lvms/api/move"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/csinode"
	"github.com/lvms-dev/lvms/nodeagent/movefence"
	"github.com/lvms-dev/lvms/nodeagent/transfer"
	"github.com/lvms-dev/lvms/operator/optest"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(testenv.Main(m, &env))
}

const id = "0123456789abcdef"

// fence plays the CSI node service's hold (csinode.Node, whose mount table reading has its own tests): the
// test says where a volume is published; devices are files.
type fence struct {
	mu       sync.Mutex
	held     map[string]string
	pubs     map[string][]string
	dir      string
	releases []string
}

func (f *fence) Hold(_ context.Context, volumeID, moveID string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held[volumeID] = moveID
	return f.pubs[volumeID], nil
}

func (f *fence) Release(volumeID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.held, volumeID)
	f.releases = append(f.releases, volumeID)
}

func (f *fence) Device(_ context.Context, volumeID string) (string, []string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return filepath.Join(f.dir, volumeID), f.pubs[volumeID], nil
}

func (f *fence) publish(volumeID string, at ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pubs[volumeID] = at
}

func (f *fence) holder(volumeID string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.held[volumeID]
}

type world struct {
	t     *testing.T
	node  string
	fence *fence
	ctl   *movefence.Controller
}

// start runs the fence controller of node ns-a in its own manager, as in the node's agent.
func start(t *testing.T) *world {
	t.Helper()
	testenv.Require(t)
	ns := env.Namespace(t)
	w := &world{t: t, node: ns + "-a", fence: &fence{held: map[string]string{}, pubs: map[string][]string{}, dir: t.TempDir()}}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Logger: logr.Discard(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	must(t, err)
	w.ctl = movefence.New(movefence.Options{NodeName: w.node, Client: mgr.GetClient(), Fence: w.fence,
		Reporter: transfer.APIReporter{Client: mgr.GetClient(), NodeName: w.node}, Recheck: 50 * time.Millisecond})
	must(t, w.ctl.SetupWithManager(mgr))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		list := &topolvmv1.LogicalVolumeList{}
		_ = env.Client.List(context.Background(), list)
		for i := range list.Items {
			if strings.HasPrefix(list.Items[i].Spec.NodeName, ns) {
				_ = env.Client.Delete(context.Background(), &list.Items[i])
			}
		}
	})
	optest.Run(t, ctx, cancel, mgr)
	return w
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// volume creates a LogicalVolume on node with a volume ID and a device file of content.
func (w *world) volume(name, node string, content []byte) string {
	w.t.Helper()
	lv := &topolvmv1.LogicalVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: topolvmv1.LogicalVolumeSpec{Name: name, NodeName: node, Size: resource.MustParse("1Mi"), DeviceClass: "ssd"}}
	must(w.t, env.Client.Create(context.Background(), lv))
	lv.Status.VolumeID = "vol-" + name
	must(w.t, env.Client.Status().Update(context.Background(), lv))
	must(w.t, os.WriteFile(filepath.Join(w.fence.dir, lv.Status.VolumeID), content, 0o600))
	return lv.Status.VolumeID
}

// annotate sets (or with "" removes) annotations as the operator does.
func (w *world) annotate(name string, kv ...string) {
	w.t.Helper()
	lv := w.get(name)
	base := lv.DeepCopy()
	if lv.Annotations == nil {
		lv.Annotations = map[string]string{}
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(lv.Annotations, kv[i])
		} else {
			lv.Annotations[kv[i]] = kv[i+1]
		}
	}
	must(w.t, env.Client.Patch(context.Background(), lv, client.MergeFrom(base)))
}

func (w *world) get(name string) *topolvmv1.LogicalVolume {
	w.t.Helper()
	lv := &topolvmv1.LogicalVolume{}
	must(w.t, env.Client.Get(context.Background(), types.NamespacedName{Name: name}, lv))
	return lv
}

// await polls until the LogicalVolume's annotation key has value want ("": absent).
func (w *world) await(name, key, want string) {
	w.t.Helper()
	var got string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got = w.get(name).Annotations[key]
		if got == want {
			return
		}
	}
	w.t.Fatalf("LogicalVolume %s: %s is %q, want %q", name, key, got, want)
}

// A hold is answered only once no publication stands, and says where the volume is published until then; a
// removed hold releases the volume and withdraws the answer.
func TestHold_AnsweredOnlyWhenUnpublished(t *testing.T) {
	testenv.Require(t)
	w := start(t)
	vol := w.volume("src", w.node, []byte("data"))
	w.fence.publish(vol, "/var/lib/kubelet/pods/uid-1/volumes/kubernetes.io~csi/src/mount")
	w.annotate("src", move.AnnotationHold, id)
	w.await("src", move.AnnotationHeld, id+":the volume is still published at /var/lib/kubelet/pods/uid-1/volumes/kubernetes.io~csi/src/mount: a pod uses it")
	if got := w.fence.holder(vol); got != id {
		t.Fatalf("the node service holds the volume for %q, want %q: new publications must be refused while the old one goes", got, id)
	}
	w.fence.publish(vol) // the pod is gone: no event, the hold looks again
	w.await("src", move.AnnotationHeld, id+":held")

	w.annotate("src", move.AnnotationHold, "")
	w.await("src", move.AnnotationHeld, "")
	if got := w.fence.holder(vol); got != "" {
		t.Fatalf("after the hold was removed the node service still holds the volume for %q", got)
	}
}

// The pod the node service refused is reported for the move holding the volume.
func TestHold_ReportsTheRefusedPod(t *testing.T) {
	testenv.Require(t)
	w := start(t)
	vol := w.volume("src", w.node, []byte("data"))
	w.annotate("src", move.AnnotationHold, id)
	w.await("src", move.AnnotationHeld, id+":held")
	w.ctl.Refused(csinode.Refusal{VolumeID: vol, LogicalVolume: "src", MoveID: id, Pod: "shop/web-0"})
	w.await("src", move.AnnotationRefusedPod, id+":shop/web-0")
}

// Asked to verify, the agent hashes the whole held volume; not while it is published.
func TestVerify_HashesTheHeldVolume(t *testing.T) {
	testenv.Require(t)
	w := start(t)
	content := []byte(strings.Repeat("moved data ", 100000))
	vol := w.volume("src", w.node, content)
	w.fence.publish(vol, "/mnt/x")
	w.annotate("src", move.AnnotationHold, id, move.AnnotationVerify, id)
	w.await("src", move.AnnotationHeld, id+":the volume is still published at /mnt/x: a pod uses it")
	if v := w.get("src").Annotations[move.AnnotationVerified]; v != "" {
		t.Fatalf("a published volume was verified: %q", v)
	}
	w.fence.publish(vol)
	sum := sha256.Sum256(content)
	w.await("src", move.AnnotationVerified, id+":"+hex.EncodeToString(sum[:]))
}

// Another node's LogicalVolume is never held, answered or read.
func TestHold_OtherNodesVolumesIgnored(t *testing.T) {
	testenv.Require(t)
	w := start(t)
	vol := w.volume("elsewhere", w.node+"x", []byte("data"))
	w.annotate("elsewhere", move.AnnotationHold, id, move.AnnotationVerify, id)
	w.volume("mine", w.node, []byte("data"))
	w.annotate("mine", move.AnnotationHold, id)
	w.await("mine", move.AnnotationHeld, id+":held") // the controller runs; the other volume had its chance
	if a := w.get("elsewhere").Annotations; a[move.AnnotationHeld] != "" || a[move.AnnotationVerified] != "" || w.fence.holder(vol) != "" {
		t.Fatalf("another node's LogicalVolume was acted on: %v", a)
	}
}

// The LogicalVolume deleted while held: the volume is released.
func TestHold_ReleasedWhenTheLogicalVolumeGoes(t *testing.T) {
	testenv.Require(t)
	w := start(t)
	vol := w.volume("src", w.node, []byte("data"))
	w.annotate("src", move.AnnotationHold, id)
	w.await("src", move.AnnotationHeld, id+":held")
	must(t, env.Client.Delete(context.Background(), w.get("src")))
	for deadline := time.Now().Add(30 * time.Second); w.fence.holder(vol) != ""; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the volume is still held after its LogicalVolume was deleted")
		}
	}
	w.fence.mu.Lock()
	defer w.fence.mu.Unlock()
	if !slices.Contains(w.fence.releases, vol) {
		t.Fatalf("releases %v", w.fence.releases)
	}
}
