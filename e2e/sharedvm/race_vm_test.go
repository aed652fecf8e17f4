package sharedvm

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/lvms-dev/lvms/api"
	"github.com/lvms-dev/lvms/e2e/testenv"
	"github.com/lvms-dev/lvms/e2e/vm"
	"github.com/lvms-dev/lvms/nodeagent/blockdev"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/shared/hostid"
	"github.com/lvms-dev/lvms/nodeagent/shared/lockd"
	"github.com/lvms-dev/lvms/nodeagent/shared/lockspace"
	"github.com/lvms-dev/lvms/nodeagent/shared/vginit"
)

// The guests' view of the test's API server and credentials, passed in their environment.
const (
	envAPI       = "LVMS_SHARED_API"
	envCA        = "LVMS_SHARED_CA"
	envCert      = "LVMS_SHARED_CERT"
	envKey       = "LVMS_SHARED_KEY"
	envNamespace = "LVMS_SHARED_NAMESPACE"
	apiPort      = 6443
	sharedVG     = "vgshared"
)

// guestNetwork puts VM i on its own subnet with one forward: the guest's port 6443 to the API server.
func guestNetwork(i int, apiAddr string) *vm.Network {
	return &vm.Network{Subnet: netip.MustParsePrefix(fmt.Sprintf("10.201.%d.0/24", i+1)),
		ToHost: []vm.Forward{{GuestPort: apiPort, HostAddr: apiAddr}}}
}

// startCluster starts an API server on the host and returns the guests' options for nodes sharing lun.
func startCluster(t *testing.T, nodes []string, lun string) (*testenv.Env, string, []vm.Options) {
	t.Helper()
	vm.Require(t)
	env, err := testenv.Start()
	if err != nil {
		t.Fatalf("start the API server: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ns := env.Namespace(t)
	apiAddr := strings.TrimSuffix(strings.TrimPrefix(env.Config.Host, "https://"), "/")
	var opts []vm.Options
	for i, n := range nodes {
		net := guestNetwork(i, apiAddr)
		opts = append(opts, vm.Options{Name: n, Disks: []vm.Disk{{Path: lun, Size: 4 << 30}}, Network: net, MemoryMiB: 1024,
			Env: map[string]string{
				envAPI:       fmt.Sprintf("https://%s:%d", net.HostSide(), apiPort),
				envCA:        base64.StdEncoding.EncodeToString(env.Config.CAData),
				envCert:      base64.StdEncoding.EncodeToString(env.Config.CertData),
				envKey:       base64.StdEncoding.EncodeToString(env.Config.KeyData),
				envNamespace: ns,
				envScale:     os.Getenv(envScale),
			}})
		// The scale walk: lvm2 under emulation takes one to two seconds per volume, 300 of them created and
		// removed, beside the package's other tests (they run in parallel).
		opts[len(opts)-1].Timeout = 50 * time.Minute
	}
	return env, ns, opts
}

// guestClient connects to the host's API server through the forwarded port. The server's certificate
// names localhost, which the forward reaches.
func guestClient(t *testing.T) (client.Client, string) {
	t.Helper()
	dec := func(k string) []byte {
		b, err := decodeEnv(k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cfg := &rest.Config{Host: os.Getenv(envAPI), TLSClientConfig: rest.TLSClientConfig{
		ServerName: "localhost", CAData: dec(envCA), CertData: dec(envCert), KeyData: dec(envKey)}, Timeout: 30 * time.Second}
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c, os.Getenv(envNamespace)
}

// TestVMSharedInitRace: two nodes start at once on one LUN. Each claims a host ID through the API and
// has the node agent's supervisor start sanlock and lvmlockd with it (the guest's lvm.conf untouched: every
// shared command carries its --config); both race to create the shared volume group behind its Lease. One
// creates it, the other waits and finds it; both join its lockspace at the same time. Then node-a creates
// and removes $LVMS_SHARED_SCALE volumes (default 300) as the shared driver does (scaleWalk), measuring the
// metadata and lock-space cost per volume.
func TestVMSharedInitRace(t *testing.T) {
	if vm.InGuest() {
		initRaceGuest(t)
		return
	}
	t.Parallel()
	nodes := []string{"node-a", "node-b"}
	env, ns, opts := startCluster(t, nodes, filepath.Join(t.TempDir(), "lun.img"))
	second := filepath.Join(t.TempDir(), "lun2.img") // for the global lock's move
	for i := range opts {
		opts[i].Disks = append(opts[i].Disks, vm.Disk{Path: second, Size: 1 << 30})
	}
	vm.RunMany(t, opts)
	holders, initializedBy := leaseFacts(t, env, ns, sharedVG)
	if len(holders) != 2 || holders[nodes[0]] == holders[nodes[1]] {
		t.Errorf("host-ID Leases by holder: %v, want one each for %v, distinct", holders, nodes)
	}
	if !slices.Contains(nodes, initializedBy) {
		t.Errorf("the volume group's Lease says it was created by %q, want one of %v", initializedBy, nodes)
	}
}

func initRaceGuest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	g := joinSharedVG(t, ctx)
	out, err := g.r.LVMCmd(ctx, "vgs", append(lockd.LVMConfig(g.l.HostID), "--noheadings", "-o", "vg_name,vg_lock_type", sharedVG)...)
	if err != nil || !strings.Contains(string(out), "sanlock") {
		t.Fatalf("vgs %s: %q, %v; want lock type sanlock", sharedVG, out, err)
	}
	t.Logf("%s: %s", g.node, strings.TrimSpace(string(out)))
	together(t, "checked")
	if g.node == "node-a" {
		scaleWalk(t, ctx, g)
	}
	together(t, "scaled")
	moveGlobalLock(t, ctx, g)
}

// secondVG is the shared volume group the global lock moves to.
const secondVG = "vgsecond"

// moveGlobalLock: a second shared volume group on the second LUN; the global lock, in the first (created
// first), moves to the second; both nodes leave the first, node-a removes it, and lvm2 commands that take
// the global lock exclusively (pvremove of the first's freed PV) still work: the second carries it now.
func moveGlobalLock(t *testing.T, ctx context.Context, g guest) {
	disks, err := vm.Disks()
	if err != nil || len(disks) != 2 {
		t.Fatalf("disks %v: %v", disks, err)
	}
	must(t, lockspace.AddDevice(ctx, g.r, disks[1]))
	if g.node == "node-a" {
		inv, err := (&blockdev.Discoverer{Runner: g.r}).Discover(ctx)
		must(t, err)
		dev, _ := inv.Resolve(disks[1])
		must(t, g.l.Create(ctx, secondVG, []*blockdev.Device{dev}, 0)) // takes the global lock: it is in the first
	}
	together(t, "second-created")
	if g.node == "node-b" {
		lockstart(t, g.l, secondVG)
	}
	together(t, "second-joined")
	if gl, err := g.l.GlobalLock(ctx); err != nil || gl != sharedVG {
		t.Fatalf("%s: the global lock is in %q (%v), want %s (the first shared volume group)", g.node, gl, err, sharedVG)
	}
	if g.node == "node-a" {
		must(t, g.l.MoveGlobalLock(ctx, sharedVG, secondVG))
		gl, err := g.l.GlobalLock(ctx)
		if err != nil || gl != secondVG {
			t.Fatalf("after the move the global lock is in %q (%v), want %s", gl, err, secondVG)
		}
		t.Logf("global lock moved from %s to %s", sharedVG, secondVG)
	}
	together(t, "moved")
	must(t, g.l.Stop(ctx, sharedVG))
	together(t, "left-first")
	if g.node == "node-a" {
		// vgremove of a sanlock VG needs its lockspace on this node only: start it again here.
		lockstart(t, g.l, sharedVG)
		cfg := lockd.LVMConfig(g.l.HostID)
		if out, err := g.r.LVMCmd(ctx, "vgremove", append(cfg, "-y", sharedVG)...); err != nil {
			t.Fatalf("remove %s: %v: %s", sharedVG, err, out)
		}
		// pvremove takes the global lock exclusively: it fails unless a joined lockspace carries it.
		if out, err := g.r.LVMCmd(ctx, "pvremove", append(cfg, "-y", disks[0])...); err != nil {
			t.Fatalf("pvremove %s after the first shared volume group was removed: %v: %s (the global lock did not move)", disks[0], err, out)
		}
		t.Logf("%s removed and its PV wiped under the global lock now in %s", sharedVG, secondVG)
	}
	together(t, "removed-first")
	must(t, g.l.Stop(ctx, secondVG))
}

// together signals this VM's arrival at a step and waits for both VMs to arrive.
func together(t *testing.T, step string) {
	t.Helper()
	vm.Signal(t, vm.Role()+"-"+step)
	for _, peer := range []string{"node-a", "node-b"} {
		vm.WaitSignal(t, peer+"-"+step)
	}
}

// guest is one VM that joined the shared volume group.
type guest struct {
	node string
	r    lvm.Runner
	l    lockspace.LVM
}

// joinSharedVG does in the guest what the node agent does for a shared volume group: claims a host ID
// through the API, has the lock managers run, puts the LUN into the devices file, creates the volume group
// behind its Lease (racing the other VM) and joins its lockspace, and returns once both VMs are in it.
func joinSharedVG(t *testing.T, ctx context.Context) guest {
	t.Helper()
	c, ns := guestClient(t)
	node := vm.Role()
	claimer, err := hostid.New(c, hostid.Options{Namespace: ns, Node: node})
	if err != nil {
		t.Fatal(err)
	}
	id, err := claimer.Claim(ctx)
	if err != nil {
		t.Fatalf("claim a host ID: %v", err)
	}
	t.Logf("%s holds host ID %d", node, id)
	r := lvm.Runner{DevicesFile: "lvms.devices"}
	startLockManagers(t, ctx, r, id)

	if err := r.EnsureDevicesFile(ctx); err != nil {
		t.Fatal(err)
	}
	l := lockspace.LVM{Runner: r, HostID: id}
	disks, err := vm.Disks()
	if err != nil || len(disks) < 1 {
		t.Fatalf("disks %v: %v", disks, err)
	}
	if err := lockspace.AddDevice(ctx, r, disks[0]); err != nil {
		t.Fatal(err)
	}
	together(t, "ready") // start the race together
	in := &vginit.Initializer{Client: c, Namespace: ns, Node: node, Poll: 500 * time.Millisecond}
	res, err := in.Ensure(ctx, sharedVG, vginit.Funcs{
		Exists: func(ctx context.Context) (bool, error) { return l.Exists(ctx, sharedVG) },
		Create: func(ctx context.Context) error {
			inv, err := (&blockdev.Discoverer{Runner: r}).Discover(ctx)
			if err != nil {
				return err
			}
			dev, _ := inv.Resolve(disks[0])
			return l.Create(ctx, sharedVG, []*blockdev.Device{dev}, 0)
		},
	})
	if err != nil {
		t.Fatalf("ensure the shared volume group: %v", err)
	}
	t.Logf("%s: volume group %s created by %s (by this node: %v)", node, sharedVG, res.InitializedBy, res.Created)
	lockstart(t, l, sharedVG)
	info, _ := r.Run(ctx, "lvmlockctl", "--info")
	started, err := l.Started(ctx)
	if err != nil || !slices.Contains(started, sharedVG) {
		t.Fatalf("lvmlockd's joined lockspaces: %v (%v), want %s; lvmlockctl --info says:\n%s", started, err, sharedVG, info)
	}
	together(t, "joined") // both in the lockspace at once
	return guest{node: node, r: r, l: l}
}

// lockstart joins vg's lockspace, retrying: the first attempts fail while sanlock acquires the host ID.
func lockstart(t *testing.T, l lockspace.LVM, vg string) {
	t.Helper()
	var err error
	for attempt := 1; attempt <= 30; attempt++ {
		if err = l.Start(t.Context(), vg); err == nil {
			return
		}
		t.Logf("lockstart %s attempt %d: %v", vg, attempt, err)
		time.Sleep(2 * time.Second)
	}
	t.Fatal(err)
}

// startLockManagers runs the node agent's lock-manager supervisor until the test ends and waits until it
// runs both daemons itself (the guest has none of its own).
func startLockManagers(t *testing.T, ctx context.Context, r lvm.Runner, id int) {
	t.Helper()
	sup, err := lockd.New(lockd.Options{Runner: r, HostID: id})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sup.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("lock managers: %v", err)
		}
	})
	for st := sup.Status(); !(st.Mode == lockd.ModeAgent && st.Sanlock.Running && st.Lvmlockd.Running); st = sup.Status() {
		select {
		case <-ctx.Done():
			t.Fatalf("the lock managers never ran: %+v", st)
		case <-time.After(200 * time.Millisecond):
		}
	}
	st := sup.Status()
	if st.Watchdog || st.Fencing != lockd.FencingOff {
		t.Errorf("a VM without a watchdog reports watchdog %v, fencing %q", st.Watchdog, st.Fencing)
	}
	t.Logf("lock managers run by the agent: sanlock pid %d, lvmlockd pid %d, host ID %d; %s", st.Sanlock.PID, st.Lvmlockd.PID, st.HostID, st.Fencing)
}

// decodeEnv reads one of the base64 credentials the host passed in the guest's environment.
func decodeEnv(k string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(os.Getenv(k))
	if err != nil || len(b) == 0 {
		return nil, fmt.Errorf("guest environment %s: %v", k, err)
	}
	return b, nil
}

// leaseFacts reads the shared path's Leases in ns: the host-ID Lease each node holds, and the node that
// created volume group vg.
func leaseFacts(t *testing.T, env *testenv.Env, ns, vg string) (hostIDs map[string]string, createdBy string) {
	t.Helper()
	var leases coordinationv1.LeaseList
	if err := env.Client.List(context.Background(), &leases, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	hostIDs = map[string]string{}
	for _, l := range leases.Items {
		switch {
		case l.Labels[hostid.Label] != "":
			hostIDs[*l.Spec.HolderIdentity] = l.Name
		case l.Name == vginit.Name(vg):
			createdBy = l.Annotations[vginit.InitializedByAnnotation]
		}
	}
	return hostIDs, createdBy
}
