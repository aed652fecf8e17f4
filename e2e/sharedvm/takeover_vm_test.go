package sharedvm

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"

	"github.com/lvms-dev/lvms/e2e/vm"
)

// takeoverIOTimeout is the sanlock I/O timeout of this test's lock managers: a dead host's locks are free
// 8×2 + 60 = 76 s after its last renewal. The production default is 10 s: 140 s.
const takeoverIOTimeout = 2

// TestVMSharedTakeover: node A has a ReadWriteOnce shared volume staged and written when its VM is killed
// (a node that dies). Node B is refused while A's lock is alive, and stages the volume once sanlock declares
// A dead (its host-dead time after A's last renewal); B reads A's data with the same checksum.
func TestVMSharedTakeover(t *testing.T) {
	if vm.InGuest() {
		agentGuest(t, takeoverGuest)
		return
	}
	t.Parallel()
	s := startSharedNodes(t, fmt.Sprintf("--sanlock-io-timeout=%d", takeoverIOTimeout))
	defer s.running.Wait()
	defer s.running.Signal("takeover-done")
	pvs := s.provision(t, map[string]corev1.PersistentVolumeAccessMode{rwoClaim: corev1.ReadWriteOnce})
	s.shareIDs(t, pvs)
	s.wait(t, "a-staged-rwo")
	s.running.Kill(s.nodes[0])
	killed := time.Now()
	s.running.Signal("a-killed")
	s.wait(t, "b-took-over")
	t.Logf("node-a killed while holding %s; node-b staged it %s later (sanlock I/O timeout %d s: host-dead after %d s; production: 140 s)",
		rwoClaim, time.Since(killed).Round(time.Second), takeoverIOTimeout, 8*takeoverIOTimeout+60)
}

func takeoverGuest(t *testing.T) {
	g := newCSIGuest(t)
	switch vm.Role() {
	case "node-a":
		writeDirect(t, g.publish(rwoClaim, g.rwo), g.data)
		vm.Signal(t, "a-staged-rwo")
		vm.WaitSignal(t, "takeover-done") // killed before
	case "node-b":
		vm.WaitSignal(t, "a-killed")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		start := time.Now()
		refused := 0
		for {
			err := g.stage(rwoClaim, g.rwo)
			if err == nil {
				break
			}
			if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "another node holds it") {
				t.Fatalf("staging %s after node-a died: %v, want FailedPrecondition (A's lock) until sanlock declares A dead", rwoClaim, err)
			}
			if refused++; refused == 1 {
				t.Logf("refused while node-a's lock is not yet expired: %v", err)
			}
			select {
			case <-ctx.Done():
				t.Fatalf("node-b never got %s after node-a died (%d refusals): %v", rwoClaim, refused, err)
			case <-time.After(2 * time.Second):
			}
		}
		if refused == 0 {
			t.Fatalf("node-b staged %s at once after node-a died: a dead node's lock must hold until its host-dead time", rwoClaim)
		}
		t.Logf("node-b staged %s %s after node-a's death was signalled, after %d refusals", rwoClaim, time.Since(start).Round(time.Second), refused)
		g.expectData(g.publishStaged(rwoClaim, g.rwo), rwoClaim+" taken over from the dead node-a")
		g.release(rwoClaim)
		vm.Signal(t, "b-took-over")
		vm.WaitSignal(t, "takeover-done")
	}
}

// csiGuest drives the node agent's CSI socket of the shared driver in a guest.
type csiGuest struct {
	t        *testing.T
	node     csi.NodeClient
	ids      map[string]string
	dir      string
	data     []byte
	want     [32]byte
	rwo, rwx *csi.VolumeCapability
}

// newCSIGuest connects to the agent's socket and waits for the host's volume IDs.
func newCSIGuest(t *testing.T) *csiGuest {
	conn, err := grpc.NewClient("unix://"+sharedSock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	g := &csiGuest{t: t, node: csi.NewNodeClient(conn), ids: map[string]string{}, dir: t.TempDir(), data: make([]byte, dataBytes)}
	vm.WaitSignal(t, "volumes-ready")
	b, err := os.ReadFile(filepath.Join(vm.SharedDir(), idsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Fields(string(b)) {
		k, v, _ := strings.Cut(line, "=")
		g.ids[k] = v
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range g.data {
		g.data[i] = byte(rng.Uint32())
	}
	g.want = sha256.Sum256(g.data)
	capability := func(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
		return &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
	}
	g.rwo, g.rwx = capability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER), capability(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)
	return g
}

func (g *csiGuest) staging(claim string) string { return filepath.Join(g.dir, "staging-"+g.ids[claim]) }
func (g *csiGuest) target(claim string) string  { return filepath.Join(g.dir, "target-"+g.ids[claim]) }

func (g *csiGuest) stage(claim string, c *csi.VolumeCapability) error {
	_, err := g.node.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{VolumeId: g.ids[claim], StagingTargetPath: g.staging(claim), VolumeCapability: c})
	return err
}

// publish stages and publishes, as the kubelet does for a pod, and returns the block device's path.
func (g *csiGuest) publish(claim string, c *csi.VolumeCapability) string {
	g.t.Helper()
	must(g.t, g.stage(claim, c))
	return g.publishStaged(claim, c)
}

func (g *csiGuest) publishStaged(claim string, c *csi.VolumeCapability) string {
	g.t.Helper()
	_, err := g.node.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{VolumeId: g.ids[claim], StagingTargetPath: g.staging(claim),
		TargetPath: g.target(claim), VolumeCapability: c})
	must(g.t, err)
	return g.target(claim)
}

// expectData reads the device with O_DIRECT and fails unless it holds what node-a wrote.
func (g *csiGuest) expectData(dev, what string) {
	g.t.Helper()
	if got := sha256.Sum256(readDirect(g.t, dev, dataBytes)); got != g.want {
		g.t.Fatalf("%s: checksum %x, node-a wrote %x", what, got, g.want)
	}
	g.t.Logf("%s with the same checksum %x", what, g.want[:8])
}

// release unpublishes and unstages.
func (g *csiGuest) release(claim string) {
	g.t.Helper()
	ctx := context.Background()
	_, err := g.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: g.ids[claim], TargetPath: g.target(claim)})
	must(g.t, err)
	_, err = g.node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: g.ids[claim], StagingTargetPath: g.staging(claim)})
	must(g.t, err)
}
