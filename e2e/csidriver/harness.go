package csidriver

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	mountutil "k8s.io/mount-utils"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/nodeagent/csinode"
	"github.com/lvms-dev/lvms/nodeagent/csinode/fakeexec"
	"github.com/lvms-dev/lvms/nodeagent/logicalvolume"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi"
	"github.com/lvms-dev/lvms/nodeagent/lvmsim"
	"github.com/lvms-dev/lvms/nodeagent/metrics"
	"github.com/lvms-dev/lvms/operator/csicontroller"
)

// Sizes of every simulated node's storage.
const (
	GiB       = int64(1) << 30
	ThickSize = 20 * GiB
	ThinVG    = 20 * GiB
	PoolSize  = 10 * GiB
	Ratio     = 5
)

// Node is one simulated node.
type Node struct {
	Name    string
	LVM     *lvmsim.LVM
	Exec    *fakeexec.Exec
	Mounter *mountutil.FakeMounter
	LVMD    lvmdapi.Client
	Service *csinode.Node
}

// Driver is the assembled driver.
type Driver struct {
	Names      driver.Names
	Client     client.Client
	Manager    manager.Manager
	Controller *csicontroller.Controller
	Identity   *csinode.Identity
	Nodes      []*Node
}

// Config is every simulated node's lvmd.yaml: "thick" (default, spare 0) and "thin" (ratio 5).
func Config() *lvmd.Config {
	zero := uint64(0)
	return &lvmd.Config{DeviceClasses: []lvmd.DeviceClass{
		{Name: "thick", VolumeGroup: "thick", Default: true, SpareGB: &zero},
		{Name: "thin", VolumeGroup: "thin", Type: lvmd.TypeThin, ThinPool: &lvmd.ThinPoolConfig{Name: "pool", OverprovisionRatio: Ratio}},
	}}
}

// Options configure Start.
type Options struct {
	Names driver.Names
	Nodes []string
	// Backoff of the controller's wait for the node; zero means a fast one for tests.
	Backoff csicontroller.Backoff
	// Setup registers more controllers (a provisioner) on the manager before it starts.
	Setup func(mgr manager.Manager, d *Driver) error
}

// Start assembles the driver and waits until every node's capacity is on its Node.
func Start(t testing.TB, cfg *rest.Config, opts Options) *Driver {
	t.Helper()
	scheme, err := opts.Names.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: &skip}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	backoff := opts.Backoff
	if backoff.Initial == 0 {
		backoff = csicontroller.Backoff{Initial: 20 * time.Millisecond, Factor: 2, Cap: time.Second}
	}
	d := &Driver{Names: opts.Names, Client: mgr.GetClient(), Manager: mgr,
		Identity:   csinode.NewIdentity(opts.Names.Driver(), "test", nil),
		Controller: csicontroller.NewController(mgr.GetClient(), mgr.GetAPIReader(), csicontroller.Options{Names: opts.Names, Backoff: backoff})}
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range opts.Nodes {
		n := d.addNode(t, ctx, direct, mgr, name)
		d.Nodes = append(d.Nodes, n)
	}
	if opts.Setup != nil {
		if err := opts.Setup(mgr, d); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	for _, n := range d.Nodes {
		d.waitCapacity(t, direct, n.Name)
	}
	return d
}

func (d *Driver) addNode(t testing.TB, ctx context.Context, c client.Client, mgr manager.Manager, name string) *Node {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{d.Names.TopologyKey(): name}}}
	if err := c.Create(ctx, node); err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), node) })
	sim := lvmsim.New()
	sim.AddVG("thick", uint64(ThickSize))
	sim.AddVG("thin", uint64(ThinVG))
	sim.AddThinPool("thin", "pool", uint64(PoolSize))
	lvmdClient, stop, err := lvmdapi.InProcess(lvmdapi.NewServer(sim.Runner(), lvmdapi.StaticConfig(Config())))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	n := &Node{Name: name, LVM: sim, Exec: fakeexec.New(), Mounter: mountutil.NewFakeMounter(nil), LVMD: lvmdClient}
	n.Service = csinode.NewNode(csinode.Options{NodeName: name, Names: d.Names, Client: mgr.GetClient(), LVMD: lvmdClient,
		Mounter: n.Mounter, Exec: n.Exec})
	if err := logicalvolume.New(mgr.GetClient(), lvmdClient, name, d.Names).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	exp := metrics.NewExporter(mgr.GetClient(), lvmdClient, name, d.Names)
	if err := mgr.Add(manager.RunnableFunc(exp.Run)); err != nil {
		t.Fatal(err)
	}
	return n
}

func (d *Driver) waitCapacity(t testing.TB, c client.Client, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		node := &corev1.Node{}
		if err := c.Get(context.Background(), types.NamespacedName{Name: name}, node); err == nil {
			for key := range node.Annotations {
				if _, ok := d.Names.IsCapacityAnnotation(key); ok {
					return
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("node %s has no capacity annotations after 30s", name)
}

// Serve serves the controller (with identity) and the first node's service (with identity) on unix
// sockets in dir, and returns their paths.
func (d *Driver) Serve(t testing.TB, dir string) (controller, node string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	controller, node = filepath.Join(dir, "controller.sock"), filepath.Join(dir, "node.sock")
	errs := make(chan error, 2)
	for path, s := range map[string]csinode.Services{
		controller: {Identity: d.Identity, Controller: d.Controller},
		node:       {Identity: d.Identity, Node: d.Nodes[0].Service},
	} {
		l, err := csinode.ListenUnix(path)
		if err != nil {
			t.Fatal(err)
		}
		g := csinode.NewGRPCServer(ctx, s)
		go func() { errs <- csinode.Serve(ctx, g, l) }()
	}
	t.Cleanup(func() {
		cancel()
		for range 2 {
			if err := <-errs; err != nil {
				t.Errorf("serve: %v", err)
			}
		}
	})
	return controller, node
}

// Node returns the named simulated node, or nil.
func (d *Driver) Node(name string) *Node {
	for _, n := range d.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Capacity reads a Node's capacity annotation for a device class.
func (d *Driver) Capacity(ctx context.Context, node, deviceClass string) (int64, error) {
	n := &corev1.Node{}
	if err := d.Client.Get(ctx, types.NamespacedName{Name: node}, n); err != nil {
		return 0, err
	}
	return strconv.ParseInt(n.Annotations[d.Names.CapacityAnnotation(deviceClass)], 10, 64)
}
