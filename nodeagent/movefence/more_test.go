package movefence_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/lvms-dev/lvms/api/move"
	topolvmv1 "github.com/lvms-dev/lvms/api/topolvm/v1"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/nodeagent/movefence"
	"github.com/lvms-dev/lvms/nodeagent/transfer"
	"github.com/lvms-dev/lvms/operator/optest"
)

// failingFence is the test's fence whose Hold can fail (the mount table cannot be read).
type failingFence struct {
	*fence
	mu      sync.Mutex
	holdErr error
}

func (f *failingFence) Hold(ctx context.Context, volumeID, moveID string) ([]string, error) {
	f.mu.Lock()
	err := f.holdErr
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return f.fence.Hold(ctx, volumeID, moveID)
}

func (f *failingFence) setHoldErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holdErr = err
}

// startFailing is start with a fence whose Hold can fail and verifications tried again after 10 ms.
func startFailing(t *testing.T) (*world, *failingFence) {
	t.Helper()
	testenv.Require(t)
	ns := env.Namespace(t)
	w := &world{t: t, node: ns + "-a", fence: &fence{held: map[string]string{}, pubs: map[string][]string{}, dir: t.TempDir()}}
	ff := &failingFence{fence: w.fence}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Logger: logr.Discard(),
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	must(t, err)
	w.ctl = movefence.New(movefence.Options{NodeName: w.node, Client: mgr.GetClient(), Fence: ff,
		Reporter: transfer.APIReporter{Client: mgr.GetClient(), NodeName: w.node}, Recheck: 50 * time.Millisecond,
		Backoff: wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 1 << 30}})
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
	return w, ff
}

// A hold whose answer cannot be known (the node's mount table unreadable) says so, never "held", and is looked
// at again until it can be answered.
func TestHold_UnknownPublicationsAreNotHeld(t *testing.T) {
	testenv.Require(t)
	w, ff := startFailing(t)
	src := w.node + "-src"
	w.volume(src, w.node, []byte("data"))
	ff.setHoldErr(errors.New("read /proc/self/mountinfo: permission denied"))
	w.annotate(src, move.AnnotationHold, id)
	w.await(src, move.AnnotationHeld, id+":cannot tell whether the volume is in use: read /proc/self/mountinfo: permission denied")
	ff.setHoldErr(nil)
	w.await(src, move.AnnotationHeld, id+":held")
}

// A LogicalVolume without a volume ID yet cannot be held: the answer says so.
func TestHold_NoVolumeIDYet(t *testing.T) {
	testenv.Require(t)
	w := start(t)
	src := w.node + "-src"
	w.volume(src, w.node, []byte("data"))
	lv := w.get(src)
	lv.Status.VolumeID = ""
	must(t, env.Client.Status().Update(context.Background(), lv))
	w.annotate(src, move.AnnotationHold, id)
	w.await(src, move.AnnotationHeld, id+":the volume has no volume ID yet")
}

// A verification that fails is reported as an error and tried again until it succeeds; the hold is not
// answered as verified meanwhile.
func TestVerify_FailureReportedAndTriedAgain(t *testing.T) {
	testenv.Require(t)
	w, _ := startFailing(t)
	src := w.node + "-src"
	vol := w.volume(src, w.node, nil)
	dev := filepath.Join(w.fence.dir, vol)
	must(t, os.Remove(dev)) // the device is not there yet
	w.annotate(src, move.AnnotationHold, id, move.AnnotationVerify, id)
	var got string
	for deadline := time.Now().Add(30 * time.Second); !strings.HasPrefix(got, id+":error: ") && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got = w.get(src).Annotations[move.AnnotationVerified]
	}
	if !strings.HasPrefix(got, id+":error: ") || !strings.Contains(got, vol) {
		t.Fatalf("verification of a missing device: %q, want an error naming it", got)
	}
	content := []byte("the source")
	must(t, os.WriteFile(dev, content, 0o600))
	sum := sha256.Sum256(content)
	w.await(src, move.AnnotationVerified, id+":"+hex.EncodeToString(sum[:]))
}
