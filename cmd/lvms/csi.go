package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/lvms-dev/lvms/api/topolvm/driver"
	"github.com/lvms-dev/lvms/nodeagent/csinode"
	"github.com/lvms-dev/lvms/nodeagent/logicalvolume"
	"github.com/lvms-dev/lvms/nodeagent/lvm"
	"github.com/lvms-dev/lvms/nodeagent/lvmd"
	"github.com/lvms-dev/lvms/nodeagent/lvmdapi"
	"github.com/lvms-dev/lvms/nodeagent/metrics"
	"github.com/lvms-dev/lvms/nodeagent/movefence"
	"github.com/lvms-dev/lvms/nodeagent/shared"
	sharedcsinode "github.com/lvms-dev/lvms/nodeagent/shared/csinode"
	"github.com/lvms-dev/lvms/nodeagent/shared/volumes"
	"github.com/lvms-dev/lvms/nodeagent/transfer"
	"github.com/lvms-dev/lvms/operator/csicontroller"
	"github.com/lvms-dev/lvms/operator/provisioner"
)

// csiDriverOptions are the CSI driver's flags shared by the operator and the node agent.
type csiDriverOptions struct {
	// legacy selects topolvm.cybozu.com; the default comes from USE_LEGACY (read once, at start).
	legacy bool
	socket string
}

func (o *csiDriverOptions) addFlags(f *pflag.FlagSet, defaultSocket string) {
	f.BoolVar(&o.legacy, "legacy", os.Getenv("USE_LEGACY") != "", "use TopoLVM's legacy names (topolvm.cybozu.com) (default: true when $USE_LEGACY is set)")
	f.StringVar(&o.socket, "csi-socket", defaultSocket, `unix socket of the CSI service ("" disables it)`)
}

func (o *csiDriverOptions) names() driver.Names { return driver.New(o.legacy) }

// csiNodeOptions are the node agent's CSI flags.
type csiNodeOptions struct {
	csiDriverOptions
	sharedSocket    string
	registrationDir string
	lvmdSocket      string
	remoteLVMD      string
	moveDeviceDir   string
}

func (o *csiNodeOptions) addFlags(f *pflag.FlagSet) {
	o.csiDriverOptions.addFlags(f, "/var/lib/kubelet/plugins/topolvm.io/node/csi-topolvm.sock")
	f.StringVar(&o.sharedSocket, "shared-csi-socket", "/var/lib/kubelet/plugins/"+driver.SharedDriver+"/node/csi.sock",
		`unix socket of the shared volume groups' CSI driver (`+driver.SharedDriver+`) ("" disables it)`)
	f.StringVar(&o.moveDeviceDir, "move-device-dir", "/dev", "directory where a move holds, copies and verifies a logical volume's device, <dir>/<volume group>/<volume> (lvms local --simulated's nodes, which activate no volume, link stand-ins there)")
	f.StringVar(&o.registrationDir, "kubelet-registration-dir", "/var/lib/kubelet/plugins_registry", `kubelet's plugin registration directory ("" disables registration)`)
	f.StringVar(&o.lvmdSocket, "lvmd-socket", "", "also serve the lvmd API on this unix socket (for TopoLVM tools)")
	f.StringVar(&o.remoteLVMD, "remote-lvmd", "", "use the lvmd at this unix socket (lvms lvmd or TopoLVM's) instead of the in-process one")
}

// setupCSINode adds lvmd, the LogicalVolume reconciler, the capacity exporter, the CSI node service and
// the kubelet registrar to the node agent's manager.
func setupCSINode(mgr manager.Manager, runner lvm.Runner, nodeName, lvmdConfig string, o csiNodeOptions) error {
	names := o.names()
	var client lvmdapi.Client
	var config lvmdapi.ConfigFunc // lvmd.yaml's thresholds for the pool metrics and events; nil with a remote lvmd
	if o.remoteLVMD != "" {
		c, conn, err := lvmdapi.Dial(o.remoteLVMD)
		if err != nil {
			return err
		}
		client = c
		if err := mgr.Add(runnable(func(ctx context.Context) error { <-ctx.Done(); return conn.Close() })); err != nil {
			return err
		}
	} else {
		watcher := lvmd.NewWatcher(lvmdConfig, 0)
		config = watcher.Current
		server := lvmdapi.NewServer(runner, watcher.Current)
		c, stop, err := lvmdapi.InProcess(server)
		if err != nil {
			return err
		}
		client = c
		if err := setupGroupSnapshots(mgr, runner, nodeName, names, watcher.Current, server.Notify); err != nil {
			return err
		}
		changes := watcher.Changes()
		for _, r := range []func(context.Context) error{
			watcher.Run,
			func(ctx context.Context) error {
				for {
					select {
					case <-ctx.Done():
						stop()
						return nil
					case <-changes:
						server.Notify()
					}
				}
			},
		} {
			if err := mgr.Add(runnable(r)); err != nil {
				return err
			}
		}
		if o.lvmdSocket != "" {
			if err := mgr.Add(runnable(func(ctx context.Context) error {
				l, err := lvmdapi.ListenUnix(o.lvmdSocket)
				if err != nil {
					return err
				}
				return lvmdapi.Serve(ctx, l, server)
			})); err != nil {
				return err
			}
		}
	}
	if err := logicalvolume.New(mgr.GetClient(), client, nodeName, names).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the LogicalVolume reconciler: %w", err)
	}
	exporter := metrics.NewExporter(mgr.GetClient(), client, nodeName, names)
	exporter.Config, exporter.Events = config, mgr.GetEventRecorder("lvms-thinpool-"+nodeName)
	if err := exporter.Register(ctrlmetrics.Registry); err != nil {
		return err
	}
	if err := mgr.Add(runnable(exporter.Run)); err != nil {
		return err
	}
	if o.socket == "" {
		return nil
	}
	// The move fence holds this node's volumes that are a move's source: the node service refuses to publish
	// them and tells the fence whom it refused.
	var fence *movefence.Controller
	node := csinode.NewNode(csinode.Options{NodeName: nodeName, Names: names, Client: mgr.GetClient(), LVMD: client, MoveDeviceDir: o.moveDeviceDir,
		OnRefused: func(r csinode.Refusal) { fence.Refused(r) }})
	fence = movefence.New(movefence.Options{NodeName: nodeName, Client: mgr.GetClient(), Fence: node,
		Reporter: transfer.APIReporter{Client: mgr.GetClient(), NodeName: nodeName}})
	if err := fence.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the move fence: %w", err)
	}
	services := csinode.Services{
		Identity: csinode.NewIdentity(names.Driver(), version, nil),
		Node:     node,
	}
	if err := mgr.Add(runnable(func(ctx context.Context) error { return csinode.ServeUnix(ctx, o.socket, services) })); err != nil {
		return err
	}
	if o.registrationDir != "" {
		reg := csinode.NewRegistrar(names.Driver(), o.socket)
		if err := mgr.Add(runnable(func(ctx context.Context) error { return reg.Serve(ctx, o.registrationDir) })); err != nil {
			return err
		}
	}
	return nil
}

// setupSharedCSINode adds the shared driver's node side to the node agent: the reconciler that creates,
// grows and removes the shared volumes assigned to this node, and the CSI node service with its kubelet
// registration.
func setupSharedCSINode(mgr manager.Manager, runner lvm.Runner, node *shared.Node, nodeName string, o csiNodeOptions) error {
	vols := &volumes.Reconciler{Client: mgr.GetClient(), Node: nodeName, Names: o.names(), Lockspace: node.Lockspace,
		Events: mgr.GetEventRecorder("lvms-shared-" + nodeName)}
	if err := vols.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the shared volumes' reconciler: %w", err)
	}
	if o.sharedSocket == "" {
		return nil
	}
	services := csinode.Services{
		Identity: csinode.NewIdentity(driver.SharedDriver, version, nil),
		Node: sharedcsinode.NewNode(sharedcsinode.Options{NodeName: nodeName, Client: mgr.GetClient(), Node: node,
			Publisher: csinode.NewNode(csinode.Options{NodeName: nodeName, Runner: runner})}),
	}
	if err := mgr.Add(runnable(func(ctx context.Context) error { return csinode.ServeUnix(ctx, o.sharedSocket, services) })); err != nil {
		return err
	}
	if o.registrationDir != "" {
		reg := csinode.NewRegistrar(driver.SharedDriver, o.sharedSocket)
		if err := mgr.Add(runnable(func(ctx context.Context) error { return reg.Serve(ctx, o.registrationDir) })); err != nil {
			return err
		}
	}
	return nil
}

// csiControllerOptions are the operator's CSI flags.
type csiControllerOptions struct {
	csiDriverOptions
	callTimeout   time.Duration
	workers       int
	nodeLostGrace time.Duration
}

func (o *csiControllerOptions) addFlags(f *pflag.FlagSet) {
	o.csiDriverOptions.addFlags(f, "/run/lvms/csi-controller.sock")
	f.DurationVar(&o.callTimeout, "csi-call-timeout", provisioner.DefaultCallTimeout,
		"how long the provisioner, resizer, snapshotter and deleter wait for one CSI call (a node agent's answer) before retrying with backoff")
	f.IntVar(&o.workers, "provisioner-workers", provisioner.DefaultWorkers, "claims, volumes and snapshots each handled at once")
	f.DurationVar(&o.nodeLostGrace, "node-lost-grace-period", provisioner.DefaultNodeLostGracePeriod,
		"how long a node may be missing or NotReady before deletions asked for on it complete without its node agent")
}

// setupCSIController adds the CSI controller service and the provisioner to the operator's manager. unsafe
// says why new shared volumes may not be made (operator/admission).
func setupCSIController(mgr manager.Manager, namespace string, o csiControllerOptions, unsafe func() string) error {
	names := o.names()
	controller := csicontroller.NewController(mgr.GetClient(), mgr.GetAPIReader(), csicontroller.Options{Names: names})
	_, err := mgr.GetRESTMapper().RESTMapping(schema.GroupKind{Group: "snapshot.storage.k8s.io", Kind: "VolumeSnapshotContent"}, "v1")
	snapshots := err == nil
	if !snapshots {
		ctrl.Log.Info("VolumeSnapshot CRDs are not installed: the snapshotter is off until the operator restarts with them")
	}
	groups, groupCSI := groupControllers(mgr, names, controller, snapshots)
	p := provisioner.New(provisioner.Options{Names: names, CSI: controller, CapacityNamespace: namespace, Snapshots: snapshots, GroupCSI: groupCSI,
		Metrics: ctrlmetrics.Registry, CallTimeout: o.callTimeout, Workers: o.workers, NodeLostGracePeriod: o.nodeLostGrace})
	if err := p.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the provisioner: %w", err)
	}
	// The shared volume groups' driver: its own controller service and provisioner, in the same process.
	sharedController := csicontroller.NewShared(mgr.GetClient(), mgr.GetAPIReader(), csicontroller.Options{Names: names, Admission: unsafe})
	sp := provisioner.New(provisioner.Options{Names: names, CSI: sharedController, Shared: true, SharedCapacity: sharedController.Capacity,
		CapacityNamespace: namespace, CallTimeout: o.callTimeout, Workers: o.workers})
	if err := sp.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up the shared driver's provisioner: %w", err)
	}
	if o.socket == "" {
		return nil
	}
	identity := csinode.NewIdentity(names.Driver(), version, nil)
	if groups != nil {
		identity = identity.WithGroupController()
	}
	services := csinode.Services{Identity: identity, Controller: controller, GroupController: groups}
	return mgr.Add(runnable(func(ctx context.Context) error {
		// The provisioner calls the controller in process; the socket is for outside tools, so failing to
		// serve it must not stop the operator.
		if err := csinode.ServeUnix(ctx, o.socket, services); err != nil {
			ctrl.LoggerFrom(ctx).Info("Not serving the CSI controller socket", "socket", o.socket, "error", err.Error())
			<-ctx.Done()
		}
		return nil
	}))
}

// runnable is a manager runnable that runs on every replica, leader or not.
type runnable func(context.Context) error

func (r runnable) Start(ctx context.Context) error { return r(ctx) }
func (r runnable) NeedLeaderElection() bool        { return false }

// csiScheme is s, or in legacy mode a scheme where LogicalVolume maps to topolvm.cybozu.com only (one Go
// type cannot serve two groups in one scheme).
func csiScheme(s *runtime.Scheme, o csiDriverOptions) (*runtime.Scheme, error) {
	if !o.legacy {
		return s, nil
	}
	return o.names().Scheme()
}
