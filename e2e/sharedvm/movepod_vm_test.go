package sharedvm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/e2e/vm"
)

// The node agent's CSI socket in the move test's guests (its default --csi-socket) and the pod's UID.
const (
	mvCSISocket = "/var/lib/kubelet/plugins/topolvm.io/node/csi-topolvm.sock"
	mvPodUID    = "6f1d2c3b-0000-4000-8000-00000000f00d"
)

// mvAttempt is one restart of node a's pod during the move: the move's phase as the host last saw it, and
// the node agent's refusal ("" when the publication succeeded).
type mvAttempt struct {
	Phase string `json:"phase"`
	Err   string `json:"err,omitempty"`
}

// mvPodTarget is where kubelet would publish the pod's volume of PersistentVolume pv.
func mvPodTarget(pv string) string {
	return "/var/lib/kubelet/pods/" + mvPodUID + "/volumes/kubernetes.io~csi/" + pv + "/mount"
}

// movePod plays a pod using a volume on its node, published through the node agent's CSI socket as kubelet
// publishes it (with the pod's name, namespace and UID). A write counts as acknowledged once the file and
// its directory are synced; every acknowledged write is recorded, to be found after the move.
type movePod struct {
	node     csi.NodeClient
	volumeID string
	target   string
	acked    map[string]string // file name → SHA-256
	n        int
	rng      *rand.ChaCha8
}

func newMovePod(t *testing.T, volumeID, pv string) *movePod {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+mvCSISocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	p := &movePod{node: csi.NewNodeClient(conn), volumeID: volumeID, target: mvPodTarget(pv), acked: map[string]string{},
		rng: rand.NewChaCha8([32]byte{byte(len(vm.Role())), 9})}
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(time.Second) {
		if _, err := p.node.NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{}); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the node agent's CSI socket never answered: %v", err)
		}
	}
	return p
}

// publish asks the node agent to publish the volume for the pod.
func (p *movePod) publish() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := p.node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: p.volumeID, TargetPath: p.target,
		VolumeCapability: &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4"}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}},
		VolumeContext: map[string]string{"csi.storage.k8s.io/pod.namespace": os.Getenv(envNamespace), "csi.storage.k8s.io/pod.name": mvPod,
			"csi.storage.k8s.io/pod.uid": mvPodUID}})
	return err
}

func (p *movePod) unpublish(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := p.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: p.volumeID, TargetPath: p.target}); err != nil {
		t.Fatalf("unpublish the pod's volume: %v", err)
	}
}

// write writes one file of 64 KiB, syncs it and the directory, and records it as acknowledged.
func (p *movePod) write(t *testing.T) {
	t.Helper()
	b := make([]byte, 64<<10)
	_, _ = p.rng.Read(b)
	name := fmt.Sprintf("ack-%s-%04d", vm.Role(), p.n)
	p.n++
	f, err := os.Create(filepath.Join(p.target, name))
	must(t, err)
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	must(t, f.Sync())
	must(t, f.Close())
	d, err := os.Open(p.target)
	must(t, err)
	must(t, d.Sync())
	must(t, d.Close())
	s := sha256.Sum256(b)
	p.acked[name] = hex.EncodeToString(s[:])
}

// run publishes the volume and writes every 200 ms, signalling started after the first acknowledged
// write, until some VM or the host signals stop; then it unpublishes.
func (p *movePod) run(t *testing.T, started, stop string) {
	t.Helper()
	if err := p.publish(); err != nil {
		t.Fatalf("the pod cannot use its volume before the move: %v", err)
	}
	p.write(t)
	vm.Signal(t, started)
	for !vm.Signalled(stop) {
		p.write(t)
		time.Sleep(200 * time.Millisecond)
	}
	p.unpublish(t)
	t.Logf("the pod acknowledged %d writes before it stopped", len(p.acked))
}

// save records the acknowledged writes in the shared directory (acked-<node>.json).
func (p *movePod) save(t *testing.T) {
	t.Helper()
	b, err := json.Marshal(p.acked)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(vm.SharedDir(), fmt.Sprintf(mvAcked, vm.Role())), b, 0o644))
}

// check fails unless every file of sums is on the published volume with its SHA-256.
func (p *movePod) check(t *testing.T, sums map[string]string, what string) {
	t.Helper()
	for name, want := range sums {
		b, err := os.ReadFile(filepath.Join(p.target, name))
		if err != nil {
			t.Fatalf("%s %s is lost: %v", what, name, err)
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != want {
			t.Fatalf("%s %s has SHA-256 %x, want %s", what, name, got, want)
		}
	}
}

// readShared decodes a JSON file of the shared directory dir.
func readShared(t *testing.T, dir, name string, into any) {
	t.Helper()
	must(t, json.Unmarshal([]byte(readSharedString(t, dir, name)), into))
}

func readSharedString(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	must(t, err)
	return string(b)
}

// addFinalizer and removeFinalizer change the claim's finalizers (the host's part).
func addFinalizer(t *testing.T, c client.Client, key types.NamespacedName, f string) {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	must(t, c.Get(context.Background(), key, pvc))
	pvc.Finalizers = append(pvc.Finalizers, f)
	must(t, c.Update(context.Background(), pvc))
}

func removeFinalizer(t *testing.T, c client.Client, key types.NamespacedName, f string) {
	t.Helper()
	for range 10 {
		pvc := &corev1.PersistentVolumeClaim{}
		must(t, c.Get(context.Background(), key, pvc))
		var keep []string
		for _, x := range pvc.Finalizers {
			if x != f {
				keep = append(keep, x)
			}
		}
		pvc.Finalizers = keep
		if err := c.Update(context.Background(), pvc); err == nil {
			return
		} else if !strings.Contains(err.Error(), "the object has been modified") {
			t.Fatal(err)
		}
	}
	t.Fatalf("could not remove finalizer %s from claim %s", f, key)
}
